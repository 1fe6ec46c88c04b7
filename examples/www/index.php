<?php
// The demo page (scripts/demo.sh serves it): proves that nginx -> drover -> php-cgi works,
// and shows what the worker saw of the request.
header('Content-Type: text/plain; charset=utf-8');

echo "Hello from drover\n\n";

$keys = [
    'REQUEST_METHOD', 'REQUEST_URI', 'QUERY_STRING', 'SCRIPT_FILENAME',
    'SERVER_SOFTWARE', 'GATEWAY_INTERFACE', 'REMOTE_ADDR',
];
foreach ($keys as $key) {
    printf("%-18s %s\n", $key, $_SERVER[$key] ?? '');
}

printf("%-18s %s\n", 'PHP', PHP_VERSION . ' (' . PHP_SAPI . ')');
printf("%-18s %d\n", 'worker pid', getmypid());
if (function_exists('posix_getpwuid')) {
    printf("%-18s %s\n", 'worker user', posix_getpwuid(posix_geteuid())['name'] ?? posix_geteuid());
}
$opcache = function_exists('opcache_get_status') ? opcache_get_status(false) : false;
printf("%-18s %s\n", 'OPcache', $opcache && $opcache['opcache_enabled'] ? 'enabled' : 'off');
