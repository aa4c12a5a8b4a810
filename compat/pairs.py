"""The compatibility suite: tfguard's wheel in virtualenvs that already hold another TensorFlow / Keras pair.

`make compat` runs this after `make test`. It builds the wheel once, then for
each pair: a fresh virtualenv under `.compat/` holding that TensorFlow and
Keras (and pytest) as a user's environment would, `pip freeze`, a plain
`pip install tfguard-*.whl` (no `--no-deps`, no extra), `pip freeze` again,
then pytest on `compat/` (firewall, Logger, live diagnosis, `tfguard run`,
the offline commands, the TensorBoard tab, what the install kept) and on
the canaries of the private surface. It prints each pair's outcome and
timings, and a closing `N passed, N failed` line.

Usage (from the repository root, with the development virtualenv's Python):

    python compat/pairs.py                       # the pairs CI runs (PAIRS)
    python compat/pairs.py 2.18.1/3.9.2 2.20.0/3.11.3
    python compat/pairs.py --keep 2.18.1/3.9.2   # reuse a virtualenv: only tfguard is reinstalled

Everything it makes lives under `.compat/` in the repository (ignored by git),
remade on each run; pip keeps its usual download cache.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORK = ROOT / ".compat"

PAIRS = ("2.16.2/3.7.0", "2.19.1/3.10.0")
"""What CI runs: the oldest supported pair (TensorFlow 2.16, the oldest Keras tfguard supports) and one in the middle."""

TESTS = ("compat", "tests/hooks/test_keras_surface.py", "tests/hooks/test_tf_surface.py",
         "tests/hooks/test_keras_compat.py", "tests/distribute/test_keras_20585_surface.py")
"""The compatibility tests, and the canaries of the private Keras / TensorFlow surface."""

TEST_TOOLS = ("pytest", "pytest-timeout")
"""Installed with the pair, at requirements.lock's versions."""


@dataclasses.dataclass
class Outcome:
    pair: str
    passed: int = 0
    failed: int = 0
    summary: str = ""
    seconds: dict = dataclasses.field(default_factory=dict)

    def line(self) -> str:
        tf_version, keras_version = self.pair.split("/")
        timings = ", ".join(f"{name} {seconds:.0f} s" for name, seconds in self.seconds.items())
        return f"TensorFlow {tf_version} with Keras {keras_version}: {self.summary} ({timings})"


def run(*args, log, **kwargs) -> subprocess.CompletedProcess:
    """Runs a command, its output appended to `log`; raises on failure naming the command and the log."""
    with open(log, "a") as out:
        out.write(f"\n$ {' '.join(map(str, args))}\n")
        out.flush()
        done = subprocess.run([str(a) for a in args], stdout=out, stderr=subprocess.STDOUT, check=False, **kwargs)
    if done.returncode != 0:
        tail = Path(log).read_text()[-3000:]
        raise SystemExit(f"compat: `{' '.join(map(str, args))}` failed (exit {done.returncode}); "
                         f"the end of {log}:\n{tail}")
    return done


def freeze(pip: list, path: Path, log) -> None:
    """`name==version` of every distribution in the virtualenv (`pip list --format=freeze`) into `path`."""
    done = subprocess.run([str(a) for a in (*pip, "list", "--format=freeze")], capture_output=True, text=True,
                          check=False)
    if done.returncode != 0:
        raise SystemExit(f"compat: pip freeze failed (exit {done.returncode}): {done.stderr[-2000:]}")
    path.write_text(done.stdout)
    with open(log, "a") as out:
        out.write(f"\n$ pip freeze > {path}\n{done.stdout}")


def locked(names) -> list[str]:
    """`name==version` of each name as requirements.lock pins it."""
    pins = {}
    for line in (ROOT / "requirements.lock").read_text().splitlines():
        requirement = line.split("#")[0].strip()
        if "==" in requirement:
            name, version = requirement.split("==")
            pins[name.lower()] = f"{name}=={version}"
    return [pins[name] for name in names]


def build_wheel(log) -> Path:
    dist = WORK / "dist"
    shutil.rmtree(dist, ignore_errors=True)
    run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", dist, ROOT, log=log)
    (wheel,) = dist.glob("tfguard-*.whl")
    return wheel


def one_pair(pair: str, wheel: Path, keep: bool) -> Outcome:
    tf_version, keras_version = pair.split("/")
    outcome = Outcome(pair)
    venv = WORK / f"tf{tf_version}-keras{keras_version}"
    log = WORK / f"tf{tf_version}-keras{keras_version}.log"
    log.write_text("")
    python, pip = venv / "bin" / "python", [venv / "bin" / "python", "-m", "pip"]
    start = time.monotonic()
    if not (keep and python.exists()):
        shutil.rmtree(venv, ignore_errors=True)
        run(sys.executable, "-m", "venv", venv, log=log)
        run(*pip, "install", "--quiet", f"tensorflow=={tf_version}", f"keras=={keras_version}",
            *locked(TEST_TOOLS), log=log)
    else:
        run(*pip, "uninstall", "--yes", "--quiet", "tfguard", log=log)
    outcome.seconds["pair install"] = time.monotonic() - start
    frozen = venv / "freeze"
    frozen.mkdir(exist_ok=True)
    freeze(pip, frozen / "before.txt", log)
    start = time.monotonic()
    run(*pip, "install", "--quiet", wheel, log=log)
    outcome.seconds["tfguard install"] = time.monotonic() - start
    freeze(pip, frozen / "after.txt", log)
    env = {**os.environ, "TFGUARD_COMPAT_TENSORFLOW": tf_version, "TFGUARD_COMPAT_KERAS": keras_version,
           "TFGUARD_COMPAT_FREEZE": str(frozen), "TF_CPP_MIN_LOG_LEVEL": "2"}
    env.pop("PYTHONPATH", None)  # tfguard comes from the wheel, never from src/
    start = time.monotonic()
    tests = subprocess.run([python, "-m", "pytest", "-q", "-p", "no:cacheprovider", *TESTS],
                           cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    outcome.seconds["tests"] = time.monotonic() - start
    with open(log, "a") as out:
        out.write(tests.stdout + tests.stderr)
    print(f"\n== TensorFlow {tf_version} with Keras {keras_version} ({venv.relative_to(ROOT)}; log {log.name})")
    print(tests.stdout[-6000:] if tests.returncode else "\n".join(tests.stdout.splitlines()[-3:]), flush=True)
    counts = dict((word, int(n)) for n, word in re.findall(r"(\d+) (passed|failed|error)", tests.stdout))
    outcome.passed = counts.get("passed", 0)
    outcome.failed = counts.get("failed", 0) + counts.get("error", 0) + (1 if tests.returncode and not counts else 0)
    outcome.summary = (tests.stdout.strip().splitlines() or [f"pytest exit {tests.returncode}"])[-1].strip("= ")
    return outcome


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pairs", nargs="*", default=list(PAIRS), metavar="TF/KERAS",
                        help=f"versions to install, e.g. 2.16.2/3.7.0 (default: {' '.join(PAIRS)})")
    parser.add_argument("--keep", action="store_true", help="reuse an existing virtualenv of the pair")
    args = parser.parse_args(argv)
    WORK.mkdir(exist_ok=True)
    start = time.monotonic()
    wheel = build_wheel(WORK / "wheel.log")
    print(f"compat: built {wheel.name} in {time.monotonic() - start:.0f} s; pairs: {', '.join(args.pairs)}", flush=True)
    outcomes = [one_pair(pair, wheel, args.keep) for pair in args.pairs]
    print("\ncompat: the pairs run")
    for outcome in outcomes:
        print(f"  {outcome.line()}")
    passed, failed = sum(o.passed for o in outcomes), sum(o.failed for o in outcomes)
    print(f"compat: {passed} passed, {failed} failed")
    return 1 if failed or not passed else 0


if __name__ == "__main__":
    sys.exit(main())
