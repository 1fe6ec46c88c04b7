<?php

namespace App\Jobs;

use Illuminate\Bus\Queueable;
use Illuminate\Contracts\Queue\ShouldQueue;
use Illuminate\Foundation\Bus\Dispatchable;
use Illuminate\Queue\InteractsWithQueue;
use Illuminate\Queue\SerializesModels;

/**
 * Works for `seconds`, then leaves a file of its own in storage/done, named by its number,
 * the worker's pid and the run: the test sees which jobs ran, where, and whether one ran
 * twice.
 */
class Record implements ShouldQueue
{
    use Dispatchable, InteractsWithQueue, Queueable, SerializesModels;

    public $number;

    public $seconds;

    public function __construct(int $number, float $seconds)
    {
        $this->number = $number;
        $this->seconds = $seconds;
    }

    public function handle()
    {
        $started = microtime(true);
        // The stop signal interrupts a sleep (queue:work's handler runs, then the job goes
        // on): sleep again until the time is up, as work that is not a sleep would go on.
        while (($left = $this->seconds - (microtime(true) - $started)) > 0) {
            usleep((int) ($left * 1e6));
        }
        $done = storage_path('done');
        @mkdir($done, 0777, true);
        $name = $done.'/'.$this->number.'.'.getmypid().'.'.bin2hex(random_bytes(4));
        file_put_contents($name.'.tmp', sprintf("%.3f\n", microtime(true) - $started));
        rename($name.'.tmp', $name);
        echo "job {$this->number} done by ".getmypid()."\n";
    }
}
