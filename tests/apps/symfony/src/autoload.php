<?php
// Debian's packages, each with its own autoloader (no Composer).
require_once '/usr/share/php/Symfony/Bundle/FrameworkBundle/autoload.php';
require_once '/usr/share/php/Symfony/Bundle/TwigBundle/autoload.php';
require_once '/usr/share/php/Twig/autoload.php';
require_once __DIR__.'/Kernel.php';
