<?php
// OPcache: the script and the file it includes are cached, and the cached code runs as
// the compiled code did (the self-test runs every script twice in one process: the
// second time from OPcache's shared memory).
echo 'loaded ', extension_loaded('Zend OPcache') ? 'yes' : 'no', "\n";
if (function_exists('opcache_get_status')) {
    $status = opcache_get_status(false);
    echo 'enabled ', var_export(is_array($status) && $status['opcache_enabled'], true), "\n";
    echo 'self cached ', var_export(opcache_is_script_cached(__FILE__), true), "\n";
}
require __DIR__ . '/opcache-lib.inc';
if (function_exists('opcache_is_script_cached')) {
    echo 'lib cached ', var_export(opcache_is_script_cached(__DIR__ . '/opcache-lib.inc'), true), "\n";
}
echo 'lib ', selftest_lib_total(range(1, 1000)), ' ', SelftestLib::twice('ab'), ' ', SELFTEST_LIB_CONST, "\n";
$closure = selftest_lib_closure(3);
echo 'closure ', $closure(4), "\n";
