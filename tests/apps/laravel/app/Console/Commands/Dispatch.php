<?php

namespace App\Console\Commands;

use App\Jobs\Record;
use Illuminate\Console\Command;
use Illuminate\Database\Schema\Blueprint;
use Illuminate\Support\Facades\Schema;

/**
 * `php artisan jobs:dispatch FIRST COUNT SECONDS`: puts Record jobs FIRST..FIRST+COUNT-1 on
 * the queue (creating the database queue's `jobs` table first, as `php artisan queue:table`
 * and `migrate` would).
 */
class Dispatch extends Command
{
    protected $signature = 'jobs:dispatch {first} {count} {seconds=0}';

    protected $description = 'Dispatch Record jobs';

    public function handle()
    {
        if (! Schema::hasTable('jobs')) {
            // The migration `php artisan queue:table` writes.
            Schema::create('jobs', function (Blueprint $table) {
                $table->bigIncrements('id');
                $table->string('queue')->index();
                $table->longText('payload');
                $table->unsignedTinyInteger('attempts');
                $table->unsignedInteger('reserved_at')->nullable();
                $table->unsignedInteger('available_at');
                $table->unsignedInteger('created_at');
            });
        }
        $first = (int) $this->argument('first');
        $count = (int) $this->argument('count');
        for ($n = $first; $n < $first + $count; $n++) {
            Record::dispatch($n, (float) $this->argument('seconds'));
        }
        $this->info("dispatched $count");

        return 0;
    }
}
