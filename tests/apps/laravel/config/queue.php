<?php

return [
    // Laravel's `database` driver, on SQLite: `queue:work` takes each job in a transaction
    // (reserved_at), deletes it once run, and gives a reserved one back after retry_after.
    'default' => 'database',
    'connections' => [
        'database' => [
            'driver' => 'database',
            'table' => 'jobs',
            'queue' => 'default',
            'retry_after' => 90,
            'after_commit' => false,
        ],
    ],
    'failed' => [
        'driver' => 'null',
    ],
];
