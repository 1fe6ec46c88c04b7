<?php

return [
    // `queue:restart` writes its timestamp here and every `queue:work` polls it.
    'default' => 'file',
    'stores' => [
        'file' => [
            'driver' => 'file',
            'path' => storage_path('framework/cache'),
        ],
    ],
    'prefix' => 'drover_test',
];
