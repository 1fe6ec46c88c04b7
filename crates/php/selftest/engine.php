<?php
// The engine: classes, interfaces, traits, enums, closures, generators, fibers,
// exceptions, references, arrays, strings, integers and floats, sorting, recursion.
declare(strict_types=1);

interface Shape { public function area(): float; }
trait Named { public function name(): string { return static::class; } }
enum Unit: string { case Cm = 'cm'; case In = 'in'; }
abstract class Base implements Shape, Stringable {
    use Named;
    public function __toString(): string { return sprintf('%s(%.3f)', $this->name(), $this->area()); }
}
final class Rect extends Base {
    public function __construct(public readonly float $w, public readonly float $h) {}
    public function area(): float { return $this->w * $this->h; }
}
final class Circle extends Base {
    public function __construct(private float $r) {}
    public function area(): float { return M_PI * $this->r ** 2; }
}
function shapes(int $n): Generator {
    for ($i = 1; $i <= $n; $i++) {
        $sent = yield $i % 3 ? new Rect($i, $i / 2) : new Circle($i / 7);
        if ($sent === 'stop') { return $i; }
    }
    return $n;
}
$all = [];
foreach (shapes(300) as $shape) { $all[] = $shape; }
usort($all, fn (Shape $a, Shape $b) => $a->area() <=> $b->area());
echo implode(' ', array_map('strval', array_slice($all, 0, 5))), "\n";
echo md5(implode(',', array_map(fn ($s) => (string) $s, $all))), "\n";
$g = shapes(10); $g->current(); $g->send('x'); $g->send('stop');
echo 'generator returned ', $g->getReturn(), "\n";

$fiber = new Fiber(function (int $x): int {
    $y = Fiber::suspend($x * 2);
    return $x + $y;
});
$first = $fiber->start(21);
$fiber->resume(100);
echo "fiber $first ", $fiber->getReturn(), "\n";

function fib(int $n): int { return $n < 2 ? $n : fib($n - 1) + fib($n - 2); }
echo 'fib ', fib(22), "\n";

try {
    try { intdiv(1, 0); }
    catch (DivisionByZeroError $e) { throw new RuntimeException('wrapped', 7, $e); }
    finally { echo "finally\n"; }
} catch (RuntimeException $e) {
    echo get_class($e), ' ', $e->getCode(), ' ', get_class($e->getPrevious()), ' ', $e->getPrevious()->getMessage(), "\n";
}
try { (function (int $i) {})('x'); } catch (TypeError $e) { echo "TypeError\n"; }

$a = ['b' => 2, 'a' => 1, 'c' => [3, 4, ['d' => 5]]];
$r = &$a['c'][2]['d']; $r *= 10; unset($r);
ksort($a);
echo json_encode($a), ' ', count($a, COUNT_RECURSIVE), "\n";
$m = []; for ($i = 0; $i < 5000; $i++) { $m["k" . ($i * 7919 % 5000)] = $i; }
krsort($m, SORT_NATURAL); echo array_key_first($m), ' ', array_sum($m), "\n";
echo PHP_INT_MAX, ' ', PHP_INT_MAX + 1, ' ', 0.1 + 0.2, ' ', intdiv(-7, 2), ' ', -7 % 3, ' ', fmod(7.5, 2), "\n";
echo str_pad(decbin(255), 12, '0', STR_PAD_LEFT), ' ', base_convert('zz', 36, 10), ' ', sprintf('%08.3f|%-6s|%x|%e', 3.14159, 'ab', 48879, 12345.678), "\n";
echo ucwords(strrev('directly bound')), ' ', str_contains('haystack', 'st') ? 'yes' : 'no', ' ', substr_count(str_repeat('ab', 100), 'ba'), "\n";
echo Unit::from('in')->name, ' ', Unit::tryFrom('m') === null ? 'null' : 'set', ' ', count(Unit::cases()), "\n";
$counter = function () { static $n = 0; return ++$n; };
$counter(); $counter(); echo 'static ', $counter(), "\n";
echo match (true) { fib(10) === 55 => 'match', default => 'no match' }, "\n";
$obj = new ArrayObject(['x' => 1, 'y' => 2]);
echo serialize($obj), ' ', serialize(unserialize(serialize([1.5, true, null, 'é']))), "\n";
list('x' => $x, 'y' => $y) = (array) $obj->getArrayCopy(); echo $x + $y, "\n";
echo var_export([1 => 'a', 'k' => [false, 1.0]], true), "\n";
