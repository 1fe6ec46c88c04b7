<?php
// Laravel's bootstrap/app.php, as `laravel new` writes it, without the HTTP kernel (this
// app only runs queue workers).

$app = new Illuminate\Foundation\Application(
    $_ENV['APP_BASE_PATH'] ?? dirname(__DIR__)
);

// Its storage (the queue's database, caches) where the environment says, so that the app's
// files can stay read-only.
if ($storage = getenv('APP_STORAGE')) {
    $app->useStoragePath($storage);
}

$app->singleton(
    Illuminate\Contracts\Console\Kernel::class,
    App\Console\Kernel::class
);

$app->singleton(
    Illuminate\Contracts\Debug\ExceptionHandler::class,
    Illuminate\Foundation\Exceptions\Handler::class
);

// SQLite transactions that take the write lock when they begin (app/Database/ImmediatePdo.php).
$app->bind('db.connector.sqlite', App\Database\ImmediateSqliteConnector::class);

return $app;
