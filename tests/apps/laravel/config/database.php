<?php

return [
    'default' => 'sqlite',
    'connections' => [
        'sqlite' => [
            'driver' => 'sqlite',
            'database' => storage_path('queue.sqlite'),
            'prefix' => '',
            'foreign_key_constraints' => true,
            // SQLite's busy timeout, in seconds: two workers and the dispatcher share the
            // file, and without one a write that meets another's lock fails at once
            // ("database is locked"), leaving a finished job's row reserved. Transactions
            // take the lock when they begin (app/Database/ImmediatePdo.php), so that they
            // wait for it rather than fail.
            'options' => [PDO::ATTR_TIMEOUT => 10],
        ],
    ],
    'migrations' => 'migrations',
];
