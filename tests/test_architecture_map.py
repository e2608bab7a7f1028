"""docs/architecture.md's rule → file table names every module under `sqsdelay/`, so a new
module cannot be added without saying which rule it holds (a package's `__init__.py` that
is only a docstring holds none); and every module under `sqsdelay/core` and `sqsdelay/cost`
has its tests in a `test_<module>.py` under its package's test folder (`tests/core`,
`tests/cost`), but for the few listed with a reason."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "sqsdelay"


def table() -> str:
    text = (ROOT / "docs" / "architecture.md").read_text()
    section = text.split("## Which file holds which rule", 1)[1].split("\n## ", 1)[0]
    return "\n".join(line for line in section.splitlines() if line.startswith("|"))


def holds_code(path: Path) -> bool:
    body = ast.parse(path.read_text()).body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    return bool(body)


def modules() -> list[str]:
    found = sorted(PACKAGE.rglob("*.py"))
    return [
        path.relative_to(PACKAGE).as_posix()
        for path in found
        if path.name != "__init__.py" or holds_code(path)
    ]


def test_every_module_is_in_the_table() -> None:
    named = set(re.findall(r"`([\w/]+\.py)`", table()))
    missing = [module for module in modules() if module not in named]
    assert not missing, f"add these to docs/architecture.md's rule → file table: {missing}"


def test_the_table_names_no_module_that_is_gone() -> None:
    named = set(re.findall(r"`([\w/]+\.py)`", table()))
    gone = sorted(name for name in named if not (PACKAGE / name).is_file())
    assert not gone, f"docs/architecture.md's table names modules that do not exist: {gone}"


# A module's tests are in a file named for it (issue 60 §5): `sqsdelay/core/x.py` has a
# `tests/core/test_x.py`, `sqsdelay/cost/render/x.py` a `tests/cost/test_x.py`, so a reader
# who has the module finds its tests, and a test file says which module it tests. A
# `test_x.py` elsewhere (tests/aws, tests/integration) tests the adapter or the whole way,
# not the pure module: it does not count.
RULE_PACKAGES = ("core", "cost")
# Modules that hold values, not rules: nothing to test on its own (checked: no function).
NO_RULES = {
    "core/defaults.py": "the settings' default values",
    "core/quotas.py": "AWS's limits, as constants",
    "core/types.py": "type aliases",
    "cost/bands.py": "the delay bands' order",
}
# Modules whose tests are still in other files, where they are today. The list only
# shrinks: a module given its own file must leave it.
NOT_YET = {
    "core/consumer_message.py": "test_consumer_rules.py, test_retries.py",
    "core/debounce.py": "aws/test_debounce.py, integration/test_debounce.py, through a Sender",
    "core/discovery.py": "integration/test_discovery.py, beside the worker's discovery",
    "core/failures.py": "test_record_decisions.py, test_trace_context.py (FailureLog)",
    "core/flows.py": "every flow's tests drive it",
    "core/message_tags.py": "integration/test_tags.py",
    "core/nservicebus.py": "integration/test_nservicebus.py, beside the emulator's queues",
    "core/outcomes.py": "aws/test_observe.py, through the step's",
    "core/queue_trios.py": "integration/test_installer.py, test_iam.py",
    "core/received.py": "test_retries.py, through the step's",
    "core/recurring_sync.py": "test_recurring.py",
    "core/schedules.py": "integration/test_schedules.py, through the emulator's scheduler",
    "core/taskiq_offload.py": "test_taskiq_delay.py",
    "core/tracing.py": "test_step.py, integration/test_fair_queues_and_traces.py",
    "core/wire_format.py": "every hop's tests read it",
    "cost/classarchive.py": "test_class_archive.py (spelt apart)",
    "cost/focus.py": "test_bill.py, test_cost_report.py",
    "cost/inputs.py": "test_fold.py, test_cost_report.py",
    "cost/job.py": "test_fold.py, test_bill.py",
    "cost/options.py": "test_cost_report.py",
    "cost/reconcile.py": "test_bill.py (the reconciliation)",
    "cost/render/charts.py": "test_cost_report.py",
    "cost/render/files.py": "test_formats.py",
    "cost/render/html.py": "test_cost_report.py",
    "cost/run.py": "test_cost_report.py, integration/test_cli.py",
    "cost/session.py": "test_cost_report_processes.py",
    "cost/whatif.py": "test_cost_report.py",
    "cost/workload.py": "test_cost_report.py",
}


def rule_modules() -> list[str]:
    return [m for m in modules() if m.split("/")[0] in RULE_PACKAGES and not m.endswith("__.py")]


def named_test_files() -> set[str]:
    """Every test file, as its path under tests/ (`aws/test_emf.py`)."""
    tests = ROOT / "tests"
    return {path.relative_to(tests).as_posix() for path in tests.rglob("test_*.py")}


def home(module: str) -> str:
    """Where `module`'s tests go: `<its package>/test_<its stem>.py` under tests/."""
    return f"{module.split('/')[0]}/test_{Path(module).stem}.py"


def without_a_test_file(modules: list[str], have: set[str]) -> list[str]:
    return [m for m in modules if home(m) not in have and m not in NO_RULES and m not in NOT_YET]


def test_every_rule_module_has_a_test_file_named_for_it() -> None:
    missing = without_a_test_file(rule_modules(), named_test_files())
    assert not missing, f"give each a tests/<package>/test_<module>.py: {missing}"


def test_a_file_of_the_name_in_another_folder_does_not_count() -> None:
    """tests/aws/test_emf.py tests aws/emf.py's writer, not core/emf.py's documents."""
    modules = ["core/emf.py", "core/capacity.py"]
    elsewhere = {"aws/test_emf.py", "integration/test_capacity.py", "cost/test_emf.py"}
    assert without_a_test_file(modules, elsewhere) == modules
    assert without_a_test_file(modules, {"core/test_emf.py", "core/test_capacity.py"}) == []
    assert home("cost/render/charts.py") == "cost/test_charts.py"


def test_the_lists_of_exceptions_name_only_modules_that_still_need_them() -> None:
    have, known = named_test_files(), set(rule_modules())
    gone = sorted(m for m in {*NO_RULES, *NOT_YET} if m not in known)
    assert not gone, f"no such module any more: take it off the lists: {gone}"
    done = sorted(m for m in NOT_YET if home(m) in have)
    assert not done, f"these have their test file now: take them off NOT_YET: {done}"
    ruled = sorted(
        m
        for m in NO_RULES
        if any(
            isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            for node in ast.walk(ast.parse((PACKAGE / m).read_text()))
        )
    )
    assert not ruled, f"these hold functions now: give them a test file: {ruled}"
