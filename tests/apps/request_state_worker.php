<?php
// tests/apps/request_state.php in worker mode: each request runs the script nginx names.
ignore_user_abort(true);
$handler = static function (): void {
    require $_SERVER['SCRIPT_FILENAME'];
};
while (frankenphp_handle_request($handler)) {
    gc_collect_cycles();
}
