<?php
// The state php-fpm gives every request fresh (issue 30, item 1), one entry per class:
// the engine's (handlers, the last error, the streams layer, the umask), standard's
// (strtok(), the stat cache, output_add_rewrite_var()) and the modules' whose request
// hooks hold it (mbstring, intl, json, libxml, random). The same script runs on php-fpm,
// classic drover-php and worker mode (tests/apps/request_state_worker.php requires it in
// each request): ?op=read answers what the request found, first thing; ?op=dirty changes
// all of it and answers what it then reads in its own request. Both end with a form, for
// the URL rewriter. ?file= names a file whose size the request reads.
$read = static function (string $file): array {
    // First: what reading the rest would change.
    $state = [
        'last_error' => error_get_last()['message'] ?? null,
        'json_last_error' => json_last_error(),
        'intl_error' => intl_get_error_code(),
        'strtok' => strtok(' '),
        'filesize' => filesize($file),
    ];
    $error = set_error_handler(null);
    restore_error_handler();
    $exception = set_exception_handler(null);
    restore_exception_handler();
    $wrappers = stream_get_wrappers();
    return $state + [
        'error_handler' => $error !== null,
        'exception_handler' => $exception !== null,
        'default_context' => stream_context_get_options(stream_context_get_default()),
        'wrapper_leak' => in_array('leak', $wrappers, true),
        'wrapper_glob' => in_array('glob', $wrappers, true),
        'umask' => umask(),
        'mb_internal_encoding' => mb_internal_encoding(),
        'mb_substitute_character' => mb_substitute_character(),
        'mb_detect_order' => mb_detect_order(),
        'mb_http_output' => mb_http_output(),
        'mb_regex_encoding' => mb_regex_encoding(),
        'libxml_internal_errors' => libxml_use_internal_errors(),
        'libxml_errors' => count(libxml_get_errors()),
        'rand' => mt_rand(),
    ];
};
$file = $_GET['file'] ?? __FILE__;
$form = "\n<form action=\"/next.php\"></form>";
header('Content-Type: text/plain');
if (($_GET['op'] ?? 'read') !== 'dirty') {
    echo json_encode($read($file)), $form;
    return;
}
@trigger_error('left behind', E_USER_NOTICE);
set_error_handler(static fn (): bool => true);
set_error_handler(static fn (): bool => true);
set_exception_handler(static function (Throwable $e): void {});
json_decode('{');
numfmt_create('en', 9999);
stream_context_set_default(['http' => ['header' => 'Authorization: Bearer secret-a']]);
stream_wrapper_register('leak', get_class(new class {
    public $context;
}));
stream_wrapper_unregister('glob');
umask(0);
mb_internal_encoding('ISO-8859-1');
mb_substitute_character('none');
mb_detect_order(['ASCII']);
mb_http_output('ISO-8859-1');
mb_regex_encoding('EUC-JP');
libxml_use_internal_errors(true);
simplexml_load_string('<unclosed>');
output_add_rewrite_var('token', 'secret-c');
$state = $read($file);
// After the read, which would consume them: a tokenizer left mid-string, and a seed.
strtok('secret-b1 secret-b2', ' ');
mt_srand(42);
mt_rand();
// What the next request's first mt_rand() draws, were the seed kept.
$state['next_rand'] = mt_rand();
mt_srand(42);
mt_rand();
echo json_encode($state), $form;
// After the json_encode() above, which clears it: an error for json_last_error().
json_decode('{');
