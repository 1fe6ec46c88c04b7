<?php

return [
    'name' => 'drover-queue-test',
    'env' => env('APP_ENV', 'production'),
    'debug' => false,
    'timezone' => 'UTC',
    'locale' => 'en',
    'key' => 'base64:'.base64_encode(str_repeat('k', 32)),
    'cipher' => 'AES-256-CBC',
    // What a queue worker needs of Laravel's default providers.
    'providers' => [
        Illuminate\Bus\BusServiceProvider::class,
        Illuminate\Cache\CacheServiceProvider::class,
        Illuminate\Foundation\Providers\ConsoleSupportServiceProvider::class,
        Illuminate\Database\DatabaseServiceProvider::class,
        Illuminate\Encryption\EncryptionServiceProvider::class,
        Illuminate\Filesystem\FilesystemServiceProvider::class,
        Illuminate\Queue\QueueServiceProvider::class,
    ],
    'aliases' => [
        'Schema' => Illuminate\Support\Facades\Schema::class,
    ],
];
