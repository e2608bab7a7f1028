"""`aws/` holds the code that calls AWS and nothing else (issue 60 §1). import-linter cannot
say it: a module that makes its calls through a client or a caller it is given (the
senders' shells, the Lambda driver, retry_later) imports no SDK. So each module under
`sqsdelay/aws` must either import an AWS SDK, or import what makes the calls
(`aws.callers`, `aws.clients`, a sender) and drive flows or call a client with it."""

from __future__ import annotations

import ast
from pathlib import Path

AWS = Path(__file__).resolve().parents[2] / "sqsdelay" / "aws"
SDKS = {"boto3", "botocore", "aioboto3", "aiobotocore"}
CALL_MAKERS = {"sqsdelay.aws.callers", "sqsdelay.aws.clients", "sqsdelay.aws.sender"}
# A flow driven (`drive`, `adrive`, `adrive_until_pause`), or a call to what the module
# imported from a call maker (a `Sender` or caller made, a client's function called): each
# makes AWS calls (celery_transport sends through a `Sender` over kombu's boto3 client). Not
# any `.send()` or `.run()`: a generator's `send` or an event loop's `run` is no AWS call.
DRIVES = {"drive", "adrive", "adrive_until_pause"}

# Modules without an AWS call, each until what it holds moves to core/ (issue 60 §1). This
# list only shrinks: a module that calls AWS, or is gone, fails until taken off.
PENDING = {
    # Its flow (pause tags, park target, the step) is pure, but it builds StepConfig and the
    # park targets from Settings: first Settings.step_config(), as Settings.send_config().
    "batch_runner.py": "the step's config, state and park targets: to core/ with the split",
}


def _imports(tree: ast.Module) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found |= {f"{node.module}.{a.name}" for a in node.names}
    return found


def _makers(tree: ast.Module) -> tuple[set[str], set[str]]:
    """The names bound to what the module imports from a call maker, and the names bound to
    a call maker module itself (`from sqsdelay.aws import clients`)."""
    names: set[str] = set()
    modules: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            for a in node.names:
                full = f"{node.module}.{a.name}"
                if full in CALL_MAKERS:
                    modules.add(a.asname or a.name)
                elif node.module in CALL_MAKERS:
                    names.add(a.asname or a.name)
        elif isinstance(node, ast.Import):
            modules |= {a.asname for a in node.names if a.name in CALL_MAKERS and a.asname}
    return names, modules


def _calls_a_maker(tree: ast.Module) -> bool:
    """Whether the module drives a flow or calls something it imported from a call maker."""
    names, modules = _makers(tree)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if isinstance(f, ast.Name) and (f.id in names or f.id in DRIVES):
            return True
        if isinstance(f, ast.Attribute) and (
            f.attr in DRIVES or (isinstance(f.value, ast.Name) and f.value.id in modules)
        ):
            return True
    return False


def calls_aws(path: Path) -> bool:
    tree = ast.parse(path.read_text())
    imported = _imports(tree)
    if {i.split(".")[0] for i in imported} & SDKS:
        return True
    makers = {i for i in imported if any(i.startswith(m) for m in CALL_MAKERS)}
    return bool(makers) and _calls_a_maker(tree)


def _modules() -> list[Path]:
    return sorted(p for p in AWS.glob("*.py") if p.name != "__init__.py")


def test_every_aws_module_calls_aws() -> None:
    without = [p.name for p in _modules() if not calls_aws(p) and p.name not in PENDING]
    assert not without, f"these aws/ modules make no AWS call: move them to core/: {without}"


def test_the_pending_list_names_only_modules_that_still_need_it() -> None:
    names = {p.name for p in _modules()}
    stale = sorted(n for n in PENDING if n not in names or calls_aws(AWS / n))
    assert not stale, f"take these off PENDING: {stale}"


def test_the_check_tells_a_pure_module_from_one_that_calls(tmp_path: Path) -> None:
    pure = tmp_path / "pure.py"
    pure.write_text("from sqsdelay.core.flows import drive\n\ndef f(flow, c):\n    return 1\n")
    driving = tmp_path / "driving.py"
    driving.write_text(
        "from sqsdelay.aws.callers import SyncCaller\nfrom sqsdelay.core.flows import drive\n\n"
        "def f(flow, clients):\n    return drive(flow, SyncCaller(clients))\n"
    )
    sdk = tmp_path / "sdk.py"
    sdk.write_text("def f():\n    import boto3\n    return boto3.client('sqs')\n")
    assert [calls_aws(p) for p in (pure, driving, sdk)] == [False, True, True]


def test_a_generators_send_or_a_loops_run_is_no_aws_call(tmp_path: Path) -> None:
    """`send` and `run` named any method: a module that imports a Sender for its type and
    sends into a generator passed (issue: the check counted any call of those names)."""
    generator = tmp_path / "generator.py"
    generator.write_text(
        "import asyncio\nfrom sqsdelay.aws.sender import Sender\n\n"
        "def f(gen, s: Sender):\n    gen.send(None)\n    return asyncio.run(g())\n"
    )
    making = tmp_path / "making.py"
    making.write_text(
        "from sqsdelay.aws.sender import Sender as S\n\ndef f(flows):\n    return S().run(flows)\n"
    )
    module = tmp_path / "module.py"
    module.write_text("from sqsdelay.aws import clients\n\ndef f(s):\n    return clients.sqs(s)\n")
    assert [calls_aws(p) for p in (generator, making, module)] == [False, True, True]
