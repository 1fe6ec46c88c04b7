<?php
// A Symfony 5.4 micro-kernel app on Debian's packages (no Composer): the tests' and the
// benches' framework app, served classic (public/index.php) and in worker mode
// (public/worker.php). Routes: /hello/{name} (a plain response), /page (a Twig page),
// /state (what a worker keeps between requests), /session (a counter in the session).
namespace App;

use Symfony\Bundle\FrameworkBundle\FrameworkBundle;
use Symfony\Bundle\FrameworkBundle\Kernel\MicroKernelTrait;
use Symfony\Bundle\TwigBundle\TwigBundle;
use Symfony\Component\DependencyInjection\Loader\Configurator\ContainerConfigurator;
use Symfony\Component\HttpFoundation\JsonResponse;
use Symfony\Component\HttpFoundation\Request;
use Symfony\Component\HttpFoundation\Response;
use Symfony\Component\HttpKernel\Kernel as BaseKernel;
use Symfony\Component\Routing\Loader\Configurator\RoutingConfigurator;

final class Kernel extends BaseKernel
{
    use MicroKernelTrait;

    /** Requests this kernel object has handled: more than 1 only in worker mode. */
    private int $handled = 0;

    public function registerBundles(): iterable
    {
        return [new FrameworkBundle(), new TwigBundle()];
    }

    public function getProjectDir(): string
    {
        return \dirname(__DIR__);
    }

    public function getCacheDir(): string
    {
        return ($_SERVER['APP_CACHE_DIR'] ?? $this->getProjectDir().'/var/cache').'/'.$this->environment;
    }

    public function getLogDir(): string
    {
        return $this->getCacheDir().'/log';
    }

    protected function configureContainer(ContainerConfigurator $c): void
    {
        $c->extension('framework', [
            'secret' => 'drover',
            'router' => ['utf8' => true],
            'http_method_override' => false,
            // The recipe's session configuration; with APP_SESSION_DEFAULTS, the bundle's
            // defaults: NativeFileSessionHandler, which sets session.save_path (to the
            // cache's sessions/) with ini_set() when it is built, on the first request.
            'session' => isset($_SERVER['APP_SESSION_DEFAULTS'])
                ? ['storage_factory_id' => 'session.storage.factory.native']
                : ['handler_id' => null, 'cookie_secure' => 'auto', 'cookie_samesite' => 'lax', 'storage_factory_id' => 'session.storage.factory.native'],
        ]);
        $c->extension('twig', ['default_path' => '%kernel.project_dir%/templates']);
        $c->services()->set(self::class)->public()->autowire();
    }

    protected function configureRoutes(RoutingConfigurator $routes): void
    {
        $routes->add('hello', '/hello/{name}')->controller([$this, 'hello'])->defaults(['name' => 'world']);
        $routes->add('page', '/page')->controller([$this, 'page']);
        $routes->add('state', '/state')->controller([$this, 'state']);
        $routes->add('session', '/session')->controller([$this, 'session']);
    }

    public function hello(string $name): Response
    {
        return new Response('Hello '.htmlspecialchars($name).'!');
    }

    public function page(Request $request): Response
    {
        $items = [];
        for ($i = 1; $i <= 20; $i++) {
            $items[] = ['id' => $i, 'name' => 'Item '.$i, 'price' => $i * 1.5];
        }
        $html = $this->getContainer()->get('twig')->render('page.html.twig', [
            'title' => $request->query->get('title', 'Products'),
            'items' => $items,
        ]);
        return new Response($html);
    }

    public function state(Request $request): JsonResponse
    {
        $this->handled++;
        return new JsonResponse([
            'pid' => getmypid(),
            'handled' => $this->handled,
            'booted_at' => $GLOBALS['drover_booted_at'] ?? null,
            'query' => $request->query->all(),
            'cookies' => $request->cookies->all(),
        ]);
    }

    public function session(Request $request): JsonResponse
    {
        $session = $request->getSession();
        $count = $session->get('count', 0) + 1;
        $session->set('count', $count);
        if ($request->query->has('user')) {
            $session->set('user', $request->query->get('user'));
        }
        return new JsonResponse(['count' => $count, 'user' => $session->get('user')]);
    }
}
