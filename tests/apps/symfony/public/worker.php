<?php
// Worker mode, written as Symfony Runtime's FrankenPhpWorkerRunner (Symfony 7.4) runs a
// kernel under FrankenPHP: the kernel is booted once, then each frankenphp_handle_request()
// call handles one request; terminate() and the garbage collector run between requests.
use Symfony\Component\HttpFoundation\Request;
use Symfony\Component\HttpKernel\TerminableInterface;

require_once dirname(__DIR__).'/src/autoload.php';

ignore_user_abort(true);
$GLOBALS['drover_booted_at'] = microtime(true);
if (isset($_SERVER['APP_BOOT_LOG'])) {
    file_put_contents($_SERVER['APP_BOOT_LOG'], getmypid()."\n", FILE_APPEND);
}

$kernel = new App\Kernel('prod', false);
$kernel->boot();

$server = array_filter($_SERVER, static fn (string $key) => !str_starts_with($key, 'HTTP_'), ARRAY_FILTER_USE_KEY);
$server['APP_RUNTIME_MODE'] = 'web=1&worker=1';

$sfRequest = null;
$sfResponse = null;
$handler = static function () use ($kernel, &$sfRequest, &$sfResponse, $server): void {
    // The environment the worker booted with, under this request's own variables.
    $_SERVER += $server;
    $sfRequest = Request::createFromGlobals();
    $sfResponse = $kernel->handle($sfRequest);
    $sfResponse->send();
};

$loopMax = (int) ($_SERVER['FRANKENPHP_LOOP_MAX'] ?? 0);
$loops = 0;
do {
    $ret = \frankenphp_handle_request($handler);
    if ($kernel instanceof TerminableInterface && $sfRequest && $sfResponse) {
        $kernel->terminate($sfRequest, $sfResponse);
    }
    $sfRequest = $sfResponse = null;
    gc_collect_cycles();
} while ($ret && (0 >= $loopMax || ++$loops < $loopMax));
