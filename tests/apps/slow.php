<?php
// The slowlog scenarios (tests/scenarios/control/slowlog.rs): three nested functions, the
// innermost sleeping 3 s, so that the stack in the slowlog names all three with their lines.
function level3() {
    sleep(3);
}

function level2() {
    level3();
}

function level1() {
    level2();
}

level1();
echo "slept ", getmypid();
