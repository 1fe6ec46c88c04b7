<?php
// A Slim 3 app (Debian's php-slim) in worker mode: the app and its routes are built once;
// each request is made from that request's $_SERVER (Slim's own environment service is
// built from the boot's $_SERVER, so it is not used), processed and sent.
require_once '/usr/share/php/Slim/autoload.php';

ignore_user_abort(true);
$app = new \Slim\App();
$served = 0;
$app->get('/hello/{name}', function ($request, $response, array $args) {
    return $response->write('Hello '.htmlspecialchars($args['name']).'!');
});
$app->get('/count', function ($request, $response) use (&$served) {
    return $response->withJson([
        'pid' => getmypid(),
        'served' => $served,
        'query' => $request->getQueryParams(),
        'client' => $request->getHeaderLine('X-Client'),
    ]);
});
$app->post('/echo', function ($request, $response) {
    return $response->withJson(['parsed' => $request->getParsedBody(), 'raw' => (string) $request->getBody()]);
});

$handler = static function () use ($app, &$served): void {
    $served++;
    $request = \Slim\Http\Request::createFromEnvironment(new \Slim\Http\Environment($_SERVER));
    $response = $app->process($request, new \Slim\Http\Response());
    $app->respond($response);
};
while (frankenphp_handle_request($handler)) {
    gc_collect_cycles();
}
