<?php
// The worker-mode test suite's worker script (tests/scenarios/worker): it boots once,
// then answers by path, each route showing or changing one part of a request's state.
// $_SERVER['BOOT_LOG'] and ['END_LOG'] (from the pool's [env]) name files that get one
// line per boot and per end of the script.
ignore_user_abort(true);
// A change the boot makes: kept for every request (a request's own changes are undone).
ini_set('precision', '10');
if (isset($_SERVER['BOOT_LOG'])) {
    file_put_contents($_SERVER['BOOT_LOG'], getmypid()."\n", FILE_APPEND);
}
// Apps draw random numbers while they boot (a cache's salt): mt_rand() is seeded now.
$boot_rand = mt_rand();
if (isset($_SERVER['BOOT_SOCKET'])) {
    // A connection opened at boot, as an app that connects to its database does.
    $boot_socket = stream_socket_server('tcp://127.0.0.1:0');
}
if (isset($_SERVER['BOOT_SEGV'])) {
    // A boot that crashes (an extension's fault): the worker dies before its first request.
    posix_kill(getmypid(), 11);
    usleep(500000);
}
if (isset($_SERVER['BOOT_STRICT'])) {
    // Laravel's and Symfony's (debug) handler: every warning becomes an exception.
    set_error_handler(static function (int $no, string $message, string $file = '', int $line = 0): bool {
        throw new ErrorException($message, 0, $no, $file, $line);
    });
}
if (isset($_SERVER['BOOT_SESSION_HANDLER'])) {
    // A save handler registered once, at boot, as a framework's container does.
    session_set_save_handler(new SessionHandler(), true);
}
if (isset($_SERVER['BOOT_FAILS'])) {
    throw new LogicException('the app cannot boot: '.$_SERVER['BOOT_FAILS']);
}

/** A stream wrapper that serves nothing: the boot registers it as "boot", a request as "leak". */
class NoWrapper
{
    public $context;
}
// A wrapper the boot registers: every request keeps it.
stream_wrapper_register('boot', NoWrapper::class);

$handled = 0;
$kept = [];

function slow_part(int $ms): void
{
    usleep($ms * 1000);
}

/** CPU time used so far, in ms (what max_execution_time counts on Linux). */
function cpu_ms(): float
{
    $u = getrusage();
    return ($u['ru_utime.tv_sec'] + $u['ru_stime.tv_sec']) * 1000
        + ($u['ru_utime.tv_usec'] + $u['ru_stime.tv_usec']) / 1000;
}

/** Burns `$ms` of CPU time. */
function burn(int $ms): void
{
    $until = cpu_ms() + $ms;
    $x = 0;
    while (cpu_ms() < $until) {
        $x++;
    }
}

$handler = static function () use (&$handled, &$kept): void {
    $handled++;
    $route = parse_url($_SERVER['REQUEST_URI'] ?? '/', PHP_URL_PATH);
    switch ($route) {
        case '/state.php':
            $server = [];
            foreach (['HTTP_X_CLIENT', 'REQUEST_METHOD', 'SCRIPT_FILENAME', 'SCRIPT_NAME',
                      'PATH_INFO', 'PHP_SELF', 'QUERY_STRING', 'FRANKENPHP_WORKER'] as $key) {
                $server[$key] = $_SERVER[$key] ?? null;
            }
            header('Content-Type: application/json');
            echo json_encode([
                'pid' => getmypid(),
                'handled' => $handled,
                'get' => $_GET,
                'post' => $_POST,
                'cookie' => $_COOKIE,
                'request' => $_REQUEST,
                'files' => array_keys($_FILES),
                'input' => file_get_contents('php://input'),
                'server' => $server,
                'env_client' => $_ENV['HTTP_X_CLIENT'] ?? null,
                'headers' => headers_list(),
                'ob_level' => ob_get_level(),
                'status' => http_response_code(),
                'session_status' => session_status(),
                'session_set' => isset($_SESSION),
                'precision' => ini_get('precision'),
                'max_execution_time' => ini_get('max_execution_time'),
                'memory_limit' => ini_get('memory_limit'),
            ]);
            return;
        case '/dirty.php':
            // Everything a request may leave behind.
            header('X-Dirty: yes');
            setcookie('dirty', '1');
            http_response_code(418);
            ini_set('precision', '3');
            ini_set('memory_limit', '77M');
            set_time_limit(99);
            $_SESSION = ['leaked' => true];
            ob_start();
            ob_start();
            echo 'dirty';
            return;
        case '/upload.php':
            $out = [];
            foreach ($_FILES as $name => $file) {
                $out[$name] = ['tmp_name' => $file['tmp_name'], 'exists' => is_file($file['tmp_name']),
                               'size' => $file['size']];
            }
            header('Content-Type: application/json');
            echo json_encode($out);
            return;
        case '/exists.php':
            echo file_exists($_GET['path'] ?? '') ? 'yes' : 'no';
            return;
        case '/lazy-session.php':
            // Symfony's NativeFileSessionHandler: built on the first request that uses the
            // session, it sets session.save_path once, in its constructor, and lives on.
            static $storage = null;
            if ($storage === null) {
                ini_set('session.save_path', $_GET['dir']);
                $storage = true;
            }
            // no break: the counter below
        case '/session.php':
            session_start();
            if (isset($_GET['user'])) {
                $_SESSION['user'] = $_GET['user'];
            }
            $_SESSION['n'] = ($_SESSION['n'] ?? 0) + 1;
            header('Content-Type: application/json');
            echo json_encode(['id' => session_id(), 'user' => $_SESSION['user'] ?? null, 'n' => $_SESSION['n']]);
            return;
        case '/form.php':
            // What a POST's start-up left the app: its fields, files and warning.
            header('Content-Type: application/json');
            echo json_encode([
                'pid' => getmypid(),
                'post' => count($_POST),
                'files' => count($_FILES),
                'input' => strlen(file_get_contents('php://input')),
                'last_error' => error_get_last()['message'] ?? null,
            ]);
            return;
        case '/handled.php':
            // The app's own error page, as set_exception_handler() gives it in classic mode.
            set_exception_handler(static function (Throwable $e): void {
                http_response_code(503);
                echo 'the app\'s error page: '.$e->getMessage();
            });
            echo 'before the exception; ';
            throw new RuntimeException('boom');
        case '/shutdown.php':
            register_shutdown_function(static function (): void {
                echo ', then the shutdown function';
                file_put_contents($_GET['marker'], 'ran');
            });
            echo 'registered';
            return;
        case '/set-handlers.php':
            // Handlers a request sets, and an error it leaves behind: none reaches the next.
            // The error comes first, so that PHP records it (a handler that returns true
            // would take it), and the answer says it was recorded.
            @trigger_error('left behind', E_USER_WARNING);
            set_error_handler(static fn (): bool => true);
            set_error_handler(static fn (): bool => true);
            set_exception_handler(static function (Throwable $e): void {});
            echo 'set: ', error_get_last()['message'] ?? 'no last error';
            return;
        case '/dirty-engine.php':
            // Engine state a request changes, which php-fpm resets for the next one.
            stream_context_set_default(['http' => ['header' => 'Authorization: Bearer secret']]);
            stream_wrapper_register('leak', NoWrapper::class);
            stream_wrapper_unregister('glob');
            umask(0);
            libxml_use_internal_errors(true);
            mt_srand(42);
            mt_rand();
            $next = mt_rand();
            mt_srand(42);
            mt_rand();
            // What the next request's first mt_rand() would draw, were the seed kept.
            echo $next;
            return;
        case '/engine.php':
            $wrappers = stream_get_wrappers();
            header('Content-Type: application/json');
            echo json_encode([
                'pid' => getmypid(),
                'default_context' => stream_context_get_options(stream_context_get_default()),
                'leak' => in_array('leak', $wrappers, true),
                'glob' => in_array('glob', $wrappers, true),
                'boot' => in_array('boot', $wrappers, true),
                'umask' => umask(),
                'libxml_internal_errors' => libxml_use_internal_errors(null),
                'rand' => mt_rand(),
            ]);
            return;
        case '/handlers.php':
            $error = set_error_handler(null);
            restore_error_handler();
            $exception = set_exception_handler(null);
            restore_exception_handler();
            header('Content-Type: application/json');
            echo json_encode([
                'pid' => getmypid(),
                'error_handler' => $error !== null,
                'exception_handler' => $exception !== null,
                'last_error' => error_get_last()['message'] ?? null,
            ]);
            return;
        case '/throw.php':
            echo 'before the exception';
            throw new RuntimeException('boom from the handler');
        case '/fatal.php':
            echo 'before the fatal error';
            undefined_function_of_the_test();
            return;
        case '/exit.php':
            echo 'said goodbye';
            exit(3);
        case '/segv.php':
            posix_kill(getmypid(), 11);
            usleep(500000);
            echo 'not killed';
            return;
        case '/big.php':
            // A long answer, written in pieces: a client may leave before its end.
            for ($i = 0; $i < 64; $i++) {
                echo str_repeat('b', 65536);
                flush();
            }
            return;
        case '/rand.php':
            echo getmypid().' '.mt_rand();
            return;
        case '/busy.php':
            burn((int) ($_GET['ms'] ?? 100));
            echo 'burned '.($_GET['ms'] ?? 100).' ms';
            return;
        case '/slow.php':
            slow_part((int) ($_GET['ms'] ?? 1000));
            echo 'slept';
            return;
        case '/leak.php':
            $kept[] = str_repeat('x', (int) ($_GET['mb'] ?? 1) << 20);
            echo 'kept '.count($kept).' chunks';
            return;
        case '/finish.php':
            echo 'answered';
            fastcgi_finish_request();
            usleep(1500000);
            file_put_contents($_GET['marker'], 'after');
            return;
        default:
            echo "handled=$handled pid=".getmypid();
    }
};

while (frankenphp_handle_request($handler)) {
    gc_collect_cycles();
}
if (isset($_SERVER['END_LOG'])) {
    file_put_contents($_SERVER['END_LOG'], getmypid()." handled $handled\n", FILE_APPEND);
}
