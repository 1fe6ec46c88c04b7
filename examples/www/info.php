<?php
// phpinfo() of a drover worker: its ini settings ([php.ini] arrives as -d), environment
// (clear_env) and extensions. A demo page: do not deploy it.
phpinfo();
