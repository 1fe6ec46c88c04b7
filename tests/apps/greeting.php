<?php
// The reload scenarios (tests/scenarios/control/reload.rs): the pool's [env] GREETING, which
// tells the test which generation of the pool served the request.
echo "greeting=", getenv("GREETING");
