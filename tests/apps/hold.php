<?php
// The status scenarios (tests/scenarios/control/status.rs): holds its worker until the test
// creates <site>/release (bounded: 30 s, so that a failed test leaves nothing running),
// first recording its pid in <site>/held-N, N from the query string.
$site = dirname(__DIR__);
$n = (int) $_GET['n'];
file_put_contents("$site/held-$n.tmp", getmypid());
rename("$site/held-$n.tmp", "$site/held-$n");
$deadline = microtime(true) + 30;
while (microtime(true) < $deadline) {
    clearstatcache();
    if (file_exists("$site/release")) {
        break;
    }
    usleep(20000);
}
echo file_exists("$site/release") ? "released $n" : "not released $n";
