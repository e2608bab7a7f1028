"""Java class-data sharing (AppCDS) for the cost job's driver JVM.

A run with an archive maps thousands of Spark classes instead of loading them one by one
(measured: a 10M-row report 16-20 s -> 12-16 s). The first report that finds no archive
records the classes its JVM loads (`-XX:DumpLoadedClassList`, a list of names, nearly free)
and, once that JVM has exited, has a plain `java -Xshare:dump` write the archive from the
list, in a detached process of its own (`dump_in_background`), so that the user's first
report does not wait for it (the dump costs about 45 s of one core): every fresh container,
CI run and EMR step is a first run, and a process that ends before the dump is done just
leaves no archive. Not the simpler `-XX:ArchiveClassesAtExit`: a JVM dumping as it exits
needs several hundred MiB on top of what it held (measured: 1.5-1.7 GiB after a 10M-row
job), a separate dump about 0.95 GiB, taken while no Spark JVM runs.

A report that starts while a dump runs stops it first (`stop_dump`): at nice 19 the dump
still took a core of two from the report's JVM (a second report 1.6-2.3x slower than the
first, issue 63). Killed, not paused: a paused dump would keep its memory beside the report.
The report then finds no archive, records a list of its own and dumps after itself: the
dump is retried by whichever report ends with nothing else starting beside it.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

# An archive that does not fit (another JVM or class path) is otherwise reported on the
# console; the run simply starts without it.
QUIET = "-Xlog:cds=off"


def class_archive_file(setting: str | Path) -> Path | None:
    """Where the archive lives (SQSDELAY_SPARK_CLASS_ARCHIVE). `auto` keys the file by the
    Java runtime and pyspark install, because an archive only fits the JVM and jars that
    wrote it; a new Java or pyspark then gets a new one instead of starting without
    sharing for ever."""
    if isinstance(setting, Path):
        return setting
    if setting == "off":
        return None
    import pyspark

    java_home = os.environ.get("JAVA_HOME")
    java = Path(java_home, "bin", "java") if java_home else Path(shutil.which("java") or "java")
    java = java.resolve()
    stamp = java.stat().st_mtime_ns if java.exists() else 0
    key = f"{java}|{stamp}|{pyspark.__version__}|{Path(pyspark.__file__).parent}"
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "sqsdelay"
    return cache / f"spark-{hashlib.sha256(key.encode()).hexdigest()[:16]}.jsa"


def use_option(archive: Path | None) -> str:
    """The driver's Java options for an archive: none while it does not exist yet. A stale
    or unreadable archive only costs the speed-up: the JVM then starts without it."""
    if archive is None or not archive.is_file():
        return ""
    return f"-XX:SharedArchiveFile={archive} {QUIET}"


def record_option(classlist: Path) -> str:
    """The Java option that makes the first run list the classes its JVM loads."""
    classlist.parent.mkdir(parents=True, exist_ok=True)
    return f"-XX:DumpLoadedClassList={classlist}"


def classlist_for(archive: Path) -> Path:
    return archive.with_name(f"{archive.name}.{os.getpid()}.classlist")


def runtime_of(spark: Any) -> tuple[str, str]:
    """The driver JVM's java executable and class path: the archive only fits those."""
    system = spark._jvm.java.lang.System
    java = str(Path(system.getProperty("java.home"), "bin", "java"))
    return java, str(system.getProperty("java.class.path"))


def dump(archive: Path, classlist: Path, java: str, classpath: str, timeout: float = 300) -> bool:
    """Write `archive` from the class list; False if that failed (the next report tries
    again, and runs without sharing meanwhile). Each dump writes its own file and renames it
    into place, so concurrent first runs never map a half-written archive."""
    partial = archive.with_name(f"{archive.name}.{os.getpid()}.partial")
    command = [
        java,
        "-Xshare:dump",
        f"-XX:SharedClassListFile={classlist}",
        f"-XX:SharedArchiveFile={partial}",
        # Loading classes needs no heap and no optimising compiler.
        "-Xmx128m",
        "-XX:+UseSerialGC",
        "-XX:TieredStopAtLevel=1",
        "-cp",
        classpath,
    ]
    try:
        done = subprocess.run(command, capture_output=True, timeout=timeout)
        if done.returncode == 0 and partial.is_file() and partial.stat().st_size > 0:
            os.replace(partial, archive)
            return True
        return False
    except (OSError, subprocess.TimeoutExpired):
        return False
    finally:
        for leftover in (partial, classlist):
            with contextlib.suppress(FileNotFoundError):
                leftover.unlink()


# A claim (or a class list, a half-written archive) older than this was left by a report
# or a dump that died: the next report takes the claim over and sweeps it.
STALE_SECONDS = 3600


def _lock(archive: Path) -> Path:
    return archive.with_name(f"{archive.name}.lock")


def claim(archive: Path) -> bool:
    """Whether this report may record a class list and dump the archive: one at a time per
    archive, so that reports run back to back before the first dump is done do not each
    start a dump of their own (about 1 GiB each). Leftovers of dead ones are swept."""
    lock = _lock(archive)
    lock.parent.mkdir(parents=True, exist_ok=True)
    now = time.time()
    for leftover in lock.parent.glob(f"{archive.name}.*"):
        with contextlib.suppress(OSError):
            if now - leftover.stat().st_mtime > STALE_SECONDS:
                leftover.unlink()
    try:
        os.close(os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return False
    except OSError:  # a cache directory we cannot write: no archive, the report goes on
        return False
    return True


def release(archive: Path, classlist: Path | None = None) -> None:
    """Give the claim up, with the class list recorded under it."""
    for leftover in (_lock(archive), classlist):
        if leftover is not None:
            with contextlib.suppress(OSError):
                leftover.unlink()


def dump_in_background(archive: Path, classlist: Path, java: str, classpath: str) -> bool:
    """Start `dump` in a process of its own session, at the lowest CPU priority, and return
    at once: the report is done, and the archive only speeds up the next one. The class path
    (hundreds of jars) goes through a file, as a command line that long is fragile. False
    (and the claim given up) if it could not be started: the report stands anyway."""
    args = classlist.with_name(f"{classlist.name}.args")
    try:
        args.write_text(f"{java}\n{classpath}\n")
        process = subprocess.Popen(  # not waited for: it outlives the report's process
            [sys.executable, "-m", "sqsdelay.cost.classarchive", str(archive), str(classlist)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    except OSError:
        release(archive, classlist)
        with contextlib.suppress(OSError):
            args.unlink()
        return False
    # The claim names the dump (its session's leader, whose group holds the dumping JVM) and
    # its list, for `stop_dump`. Written here, not by the dump: at nice 19 it may not run
    # before the next report starts. Not created again if the dump already gave it up.
    with contextlib.suppress(OSError):
        fd = os.open(_lock(archive), os.O_WRONLY | os.O_TRUNC)
        with os.fdopen(fd, "w") as f:
            f.write(f"{process.pid}\n{classlist}\n")
    return True


def stop_dump(archive: Path, timeout: float = 5.0) -> bool:
    """Stop the background dump of `archive`, if one runs, before a report starts its JVM;
    True if there was one. Its half-written file, its list and its claim go with it, so the
    report may claim, record and dump again. A claim with no dump named in it is a report's
    (recording): left alone."""
    lock = _lock(archive)
    try:
        pid_line, listed, *_ = [*lock.read_text().splitlines(), "", ""]
        pid = int(pid_line)
    except (OSError, ValueError):
        return False
    if _is_dump(pid, archive):
        with contextlib.suppress(OSError):
            os.killpg(pid, signal.SIGKILL)  # the group: the dump and its JVM
        deadline = time.monotonic() + timeout
        while _is_dump(pid, archive):
            if time.monotonic() > deadline:
                return False  # still there: its claim stays, the report runs beside it
            time.sleep(0.02)
    # Killed, or dead without giving up its claim: sweep what it left.
    leftovers = [archive.with_name(f"{archive.name}.{pid}.partial"), lock]
    classlist = Path(listed)
    if classlist.parent == archive.parent and classlist.name.startswith(f"{archive.name}."):
        leftovers += [classlist, classlist.with_name(f"{classlist.name}.args")]
    for leftover in leftovers:
        with contextlib.suppress(OSError):
            leftover.unlink()
    return True


def _is_dump(pid: int, archive: Path) -> bool:
    """Whether `pid` is the live background dump of `archive` (not a pid used again since,
    nor a zombie that nothing reaped)."""
    proc = Path("/proc")
    if proc.is_dir():
        try:
            words = (proc / str(pid) / "cmdline").read_bytes().split(b"\0")
        except OSError:
            return False
        return b"sqsdelay.cost.classarchive" in words and os.fsencode(archive) in words
    try:  # no /proc (macOS)
        done = subprocess.run(["ps", "-o", "command=", "-p", str(pid)], capture_output=True)
    except OSError:
        return False
    return b"sqsdelay.cost.classarchive" in done.stdout and os.fsencode(archive) in done.stdout


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m sqsdelay.cost.classarchive ARCHIVE CLASSLIST`: the background dump. It
    holds the report's claim (`claim`) and gives it up when done."""
    archive, classlist = (Path(a) for a in (argv if argv is not None else sys.argv[1:]))
    args = classlist.with_name(f"{classlist.name}.args")
    try:
        java, classpath = args.read_text().splitlines()[:2]
        with contextlib.suppress(OSError):
            os.nice(19)  # behind anything the machine does next
        return 0 if dump(archive, classlist, java, classpath) else 1
    except (OSError, ValueError):
        return 1
    finally:
        with contextlib.suppress(OSError):
            args.unlink()
        release(archive, classlist)


if __name__ == "__main__":
    sys.exit(main())
