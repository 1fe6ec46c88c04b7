<?php

namespace App\Database;

use Illuminate\Database\Connectors\SQLiteConnector;

/** Laravel's SQLite connector, making an ImmediatePdo (bound in bootstrap/app.php). */
class ImmediateSqliteConnector extends SQLiteConnector
{
    protected function createPdoConnection($dsn, $username, $password, $options)
    {
        return new ImmediatePdo($dsn, $username, $password, $options);
    }
}
