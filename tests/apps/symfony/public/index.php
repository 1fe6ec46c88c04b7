<?php
// Classic mode: the kernel is booted for every request (php-fpm, drover-php classic).
require_once dirname(__DIR__).'/src/autoload.php';

$kernel = new App\Kernel('prod', false);
$request = Symfony\Component\HttpFoundation\Request::createFromGlobals();
$response = $kernel->handle($request);
$response->send();
$kernel->terminate($request, $response);
