<?php

namespace App\Database;

use PDO;

/**
 * A PDO whose transactions begin with SQLite's BEGIN IMMEDIATE, which takes the write lock
 * at the start and waits for it within the busy timeout. PDO's own BEGIN is deferred: a
 * transaction that has read (the queue's `lockForUpdate()->find()`, which SQLite cannot
 * lock) and then writes while another connection holds the write lock gets "database is
 * locked" at once, without waiting, since waiting could deadlock. Under the two copies and
 * the dispatcher that share the file, that failed a finished job's delete and left its row
 * reserved. MySQL and PostgreSQL, the queue's usual databases, lock the row instead.
 */
class ImmediatePdo extends PDO
{
    private bool $open = false;

    public function beginTransaction(): bool
    {
        $this->exec('BEGIN IMMEDIATE');

        return $this->open = true;
    }

    public function commit(): bool
    {
        $this->exec('COMMIT');
        $this->open = false;

        return true;
    }

    public function rollBack(): bool
    {
        $this->open = false;
        $this->exec('ROLLBACK');

        return true;
    }

    public function inTransaction(): bool
    {
        return $this->open;
    }
}
