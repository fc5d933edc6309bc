"""The project's fixture repositories (examples/repos/): Horovod spread over a repository as public code spreads
it. Each original runs once under horovodrun at np 2 and prints its losses; `compare migrate REPO -o OUT` migrates
it as a whole, and the migrated tree trains the same under torchrun (`compare check`: parity holds); the
migration with a planted bug does not (parity fails). One fixture goes through `compare migrate --verify --entry`
itself, as a user types it. The hand-written DDP migrations in tests/data/repos_ddp/ (the reference the tool was
built against) are launched by `make test-campaign` only: the tool's output is what the suite holds."""

from __future__ import annotations

import concurrent.futures
import contextlib
import io
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers import ROOT, launch_env, ok, tool
from helpers import finished as finished_launch

from compare.__main__ import main as compare_main
from compare.launch.process import kill_tree
from compare.names import Exit

# The module's launches (every fixture original, its migration and its planted bug: 39) are made once, in the
# first test that asks for them, two at a time, beside another test file in make test's launch stage.
pytestmark = pytest.mark.timeout(1200)

REPOS = ROOT / "examples" / "repos"
MIGRATED = ROOT / "tests" / "data" / "repos_ddp"
SEED = "42"  # every entry's default seed
DIVERGES = r"parity fails: diverges at step [12] \(seed 42\)"  # the first step runs before any update


@dataclass(frozen=True)
class Fixture:
    steps: int  # optimizer steps of one epoch at np 2 (one loss line each)
    bug_file: str  # the file of the hand-written DDP migration the planted bug edits
    bug: tuple[tuple[str, str], ...]  # (text, replacement) pairs
    tool_bug_file: str  # the file of `compare migrate`'s output the planted bug edits
    tool_bug: tuple[tuple[str, str], ...]
    horovod_args: tuple[str, ...] = ()
    ddp_args: tuple[str, ...] = ()  # the hand-written migration's
    tool_args: tuple[str, ...] | None = None  # `compare migrate`'s output's, where not ddp_args (the original's option)
    entry: tuple[str, ...] = ("train.py",)  # a script, or ("-m", "package.module")
    fails: str = DIVERGES  # what `compare check` says of the planted bug
    # the check finds no difference beyond the printed rounding (0), not merely one within the band
    digit_for_digit: bool = False

WRONG_ROUTE = ('    args = parser.parse_args()\n    if args.distributed == "horovod":\n'
               '        args.distributed = "torch"\n    return args\n')


# plugin_backend's hand-written DDP backend registers the float16 hook on the wrapper the planted bug leaves out
HAND_WRITTEN_HOOK = ("        wrapped.register_comm_hook(None, default_hooks.fp16_compress_hook)"
                     "  # as Horovod's Compression.fp16\n")
FIXTURES = {
    # the wrapper's all_reduce_mean turned into a sum: the printed mean loss doubles
    "wrapper_module": Fixture(10, "utils/distributed.py", (("    return reduced / dist.get_world_size()\n",
                                                            "    return reduced\n"),),
                              "utils/ddp_helpers.py",
                              (("    result = (result / dist.get_world_size()).to(tensor.device)\n",
                                "    result = result.to(tensor.device)\n"),)),
    # the DDP backend forgets to wrap the model: each rank trains alone. Its optimizer's gradients travel as
    # float16 (hvd.Compression.fp16): the migration keeps the round trip, so its losses are the original's digit
    # for digit, where a migration that dropped it parts from them in the sixth digit, inside the band
    "plugin_backend": Fixture(12, "backends/ddp_backend.py", (("wrapped = DistributedDataParallel(model)",
                                                               "wrapped = model"),
                                                              (HAND_WRITTEN_HOOK, "")),
                              "backends/horovod_backend.py",
                              (("return average_gradients_at_step(optimizer, compression=default_hooks"
                                ".fp16_compress_hook)", "return optimizer"),), digit_for_digit=True),
    # the learning rate no longer scaled by the world size on the DDP path; the migrated tree launched with the
    # original's --horovod, which now takes the repository's DDP path
    "horovod_switch": Fixture(8, "train.py", (("lr=args.lr * world_size", "lr=args.lr"),),
                              "train.py", (("lr=args.lr * world_size", "lr=args.lr"),),
                              ("--horovod",), ("--distributed",), ("--horovod",)),
    # the model left unwrapped in the Trainer (and so no .module); in the tool's migration, which keeps the model
    # and trains through the wrapper, the training step's forward through the model itself: DDP never sees it
    "trainer_class": Fixture(10, "trainer.py", (("self.model = DDP(model)", "self.model = model"),
                                                ("self.model.module.num_classes", "self.model.num_classes")),
                             "trainer.py", (("logits = self.model_ddp(inputs)", "logits = self.model(inputs)"),)),
    # the wrapper's average flag ignored: the averaged training loss becomes a sum
    "metrics_cpu": Fixture(10, "utils/dist.py", (("    if average:\n        reduced /= torch_dist.get_world_size()\n",
                                                  ""),),
                           "utils/dist.py", (("all_reduce_average_or_op(tensor.cpu(), average=average)",
                                              "all_reduce_average_or_op(tensor.cpu(), average=False)"),)),
    # the discriminator, the second optimizer's model, left out of DDP
    "two_optimizers": Fixture(8, "train.py", (("discriminator = DDP(Discriminator(), find_unused_parameters=True)",
                                               "discriminator = Discriminator()"),),
                              "train.py", (("opt_d = average_gradients_at_step(opt_d)", "opt_d = opt_d"),)),
    # no_sync on every micro-batch: the accumulated gradients are never averaged
    "accumulation_split": Fixture(8, "loop.py", (("with contextlib.nullcontext() if last else model.no_sync():",
                                                  "with model.no_sync():"),),
                                  "optim.py", (("return average_gradients_at_step(optimizer)", "return optimizer"),)),
    # Horovod reached through an accessor (`def distributed(): from horovod import torch as hvd; return hvd`) whose
    # module the entry passes down as an argument: the EMA copy's broadcast dropped, so rank 1 evaluates another
    # average while training agrees
    "package_entry": Fixture(10, "tinynet/train.py", (("    for tensor in ema.module.state_dict().values():\n"
                                                       "        dist.broadcast(tensor, src=0)\n", ""),),
                             "tinynet/train.py", (("    for tensor in (ema.module.state_dict()).values():\n"
                                                   "        dist.broadcast(tensor, src=0)\n", ""),),
                             entry=("-m", "tinynet.train"),
                             fails=r"parity fails: the training losses agree, the evaluation at step 10 differs"),
    # a script that extends sys.path, a package, a probe, two inits, an f-string (examples/repos/script_paths): the
    # loss average becomes a sum
    "script_paths": Fixture(8, "trainkit/ddp_helpers.py", (("    result = (result / dist.get_world_size())"
                                                           ".to(tensor.device)\n",
                                                           "    result = result.to(tensor.device)\n"),),
                            "trainkit/ddp_helpers.py", (("    result = (result / dist.get_world_size())"
                                                         ".to(tensor.device)\n",
                                                         "    result = result.to(tensor.device)\n"),),
                            entry=("scripts/train.py",)),
    # issue 49's classes, each migrated with the model kept and the training forward through the wrapper:
    # the training step through the inner network itself, not the wrapper (the saver, the EMA and the resume see
    # the model's own keys on both sides)
    "trainer_checkpoint": Fixture(10, "trainer.py", (("logits = self.model_ddp(inputs)",
                                                      "logits = self.model.model(inputs)"),),
                                  "trainer.py", (("logits = self.model_ddp(inputs)",
                                                  "logits = self.model.model(inputs)"),)),
    # the sampled sub-network's forward through the model itself, not the wrapper
    "supernet_sampling": Fixture(8, "train.py", (("cross_entropy(ddp_model(inputs), labels)",
                                                  "cross_entropy(model(inputs), labels)"),),
                                 "train.py", (("cross_entropy(ddp_model(inputs), labels)",
                                               "cross_entropy(model(inputs), labels)"),)),
    # two encoders in one optimizer: its averaging dropped, each rank trains its own pair
    "contrastive_encoders": Fixture(8, "train.py", (("    optimizer = average_gradients_at_step(optimizer)\n", ""),),
                                    "train.py", (("    optimizer = average_gradients_at_step(optimizer)\n", ""),)),
    # a switch whose default is horovod beside the repository's own DDP path, which does another job (its gather's
    # backward sums, its checkpoint has `module.` keys): the Horovod branch is migrated in place. The planted bug is
    # the wrong route: the Horovod value sent to the own path right after the parse
    "contrastive_switch": Fixture(16, "train.py", (("    return parser.parse_args()\n", WRONG_ROUTE),),
                                  "train.py", (("    return parser.parse_args()\n", WRONG_ROUTE),)),
    # a GAN resumed on rank 0 from start.pt, a checkpoint the Horovod original wrote, on both sides: the
    # generator's forward through the generator itself, not its wrapper
    "gan_resume": Fixture(8, "train.py", (("fake = ddp_generator(noise(len(real), draws))",
                                           "fake = generator(noise(len(real), draws))"),),
                          "train.py", (("fake = ddp_generator(noise(len(real), draws))",
                                        "fake = generator(noise(len(real), draws))"),),
                          ("--resume", "start.pt"), ("--resume", "start.pt")),
}
NAMES = sorted(FIXTURES)
# Checked through `compare migrate --verify --entry` as a user types it, whose own launches are the original's and
# the migration's (the `verified` fixture); the others' are the `launched` fixture's.
VERIFIED = ("contrastive_switch",)
LAUNCHED = [name for name in NAMES if name not in VERIFIED]


def _plant(tree: Path, file: str, bug: tuple[tuple[str, str], ...]) -> None:
    path = tree / file
    code = path.read_text()
    for text, replacement in bug:
        assert code.count(text) == 1, f"{text!r} not once in {path}"
        code = code.replace(text, replacement)
    path.write_text(code)


def fixture_of(name: str) -> Fixture:
    return FIXTURES[name]


def planted(name: str, out: Path) -> Path:
    """A copy of the hand-written DDP migration with the fixture's bug in it (each text must be there: the bug is
    real)."""
    tree = out / f"{name}_bug"
    shutil.copytree(MIGRATED / name, tree, ignore=shutil.ignore_patterns("__pycache__"))
    _plant(tree, fixture_of(name).bug_file, fixture_of(name).bug)
    return tree


def migrated(name: str, out: Path) -> Path:
    """`compare migrate REPO -o OUT`, as a user types it: exit 0, nothing left that needs a person."""
    tree = out / f"{name}_ddp"
    if not tree.exists():
        code, printed = quiet(["migrate", str(REPOS / name), "-o", str(tree)])
        assert code == Exit.OK, printed
    return tree


def planted_in_migration(name: str, out: Path) -> Path:
    tree = out / f"{name}_ddp_bug"
    shutil.copytree(migrated(name, out), tree, ignore=shutil.ignore_patterns("__pycache__"))
    _plant(tree, FIXTURES[name].tool_bug_file, FIXTURES[name].tool_bug)
    return tree


def launch(launcher: str, tree: Path, entry: tuple[str, ...], args: tuple[str, ...]) -> subprocess.CompletedProcess:
    """The entry from the repository's root as its README says to run it, nothing on PYTHONPATH (a script's
    directory, or the working directory of `-m`, is what Python puts on the import path)."""
    if launcher == "horovodrun":
        command = [tool("horovodrun"), "-np", "2", "-H", "localhost:2", "--gloo", "--network-interfaces", "lo",
                   sys.executable, *entry]
    else:
        command = [tool("torchrun"), "--standalone", "--nproc-per-node", "2", *entry]
    env = launch_env()
    env.pop("PYTHONPATH", None)
    return subprocess.run([*command, "--epochs", "1", *args], cwd=tree, env=env,
                          capture_output=True, text=True, timeout=240, start_new_session=True)


def _launch_all(jobs: dict) -> dict:
    with concurrent.futures.ThreadPoolExecutor(2) as pool:  # two at a time: much of a launch is waiting
        return dict(zip(jobs, pool.map(lambda job: launch(*job), jobs.values()), strict=True))


@pytest.fixture(scope="module")
def launched(tmp_path_factory, horovod_built):
    """Every original under horovodrun, its migration by `compare migrate` and that migration with a planted bug
    under torchrun, once for the module. Keys: (name, "horovod" | "migrated" | "migrated bug")."""
    out = tmp_path_factory.mktemp("fixture_repos")
    jobs = {}
    for name in LAUNCHED:
        fixture = FIXTURES[name]
        jobs[name, "horovod"] = ("horovodrun", REPOS / name, fixture.entry, fixture.horovod_args)
        args = fixture.ddp_args if fixture.tool_args is None else fixture.tool_args
        jobs[name, "migrated"] = ("torchrun", migrated(name, out), fixture.entry, args)
        jobs[name, "migrated bug"] = ("torchrun", planted_in_migration(name, out), fixture.entry, args)
    return out, _launch_all(jobs)


@pytest.fixture(scope="module")
def references(launched):
    """The hand-written migrations and their planted bugs (`make test-campaign` only)."""
    out, results = launched
    jobs = {}
    for name in NAMES:
        fixture = fixture_of(name)
        jobs[name, "ddp"] = ("torchrun", MIGRATED / name, fixture.entry, fixture.ddp_args)
        jobs[name, "bug"] = ("torchrun", planted(name, out), fixture.entry, fixture.ddp_args)
        if name in VERIFIED:
            jobs[name, "horovod"] = ("horovodrun", REPOS / name, fixture.entry, fixture.horovod_args)
    jobs["horovod_switch", "own ddp path"] = ("torchrun", REPOS / "horovod_switch", ("train.py",), ("--distributed",))
    return out, {**results, **_launch_all(jobs)}


def quiet(args: list[str]) -> tuple[int, str]:
    """`python -m compare ARGS` in this process: its exit status and what it printed."""
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = compare_main(args)
    return code, printed.getvalue()


def finished(launched, name: str, side: str) -> subprocess.CompletedProcess:
    """The launch, which must have ended well; a torchrun launch whose only failure is a worker's abort as its
    interpreter exited, after the last step was printed, counts as done, as the project's launchers count it
    (PyTorch's Gloo teardown race: docs/fault-tolerance.md, "Gloo's abort at exit")."""
    result = launched[1][name, side]
    if side == "horovod":
        return ok(result)
    return finished_launch(result, last_line=f"step {fixture_of(name).steps} loss ")


def record(launched, name: str, side: str) -> Path:
    """The side's rank-0 loss lines as a run record (compare import text)."""
    out, _ = launched
    result = finished(launched, name, side)
    log = out / f"{name}-{side.replace(' ', '_')}.log"
    log.write_text(result.stdout)
    run_dir = out / "records" / f"{name}-{side.replace(' ', '_')}"
    if not run_dir.exists():
        framework = "horovod" if side == "horovod" else "ddp"
        code, printed = quiet(["import", "text", str(log), "--out", str(run_dir), "--framework", framework,
                               "--world-size", "2", "--seed", SEED])
        assert code == Exit.OK, printed
    return run_dir


def check(launched, name: str, side: str) -> tuple[int, str]:
    return quiet(["check", str(record(launched, name, "horovod")), str(record(launched, name, side))])


@pytest.mark.slow
@pytest.mark.parametrize("name", LAUNCHED)
def test_original_runs_and_prints_its_losses(launched, name):
    result = finished(launched, name, "horovod")
    # one line per optimizer step, from rank 0 only (Gloo's prefix names the rank)
    steps = re.findall(r"^\[(\d+)\]<stdout>:step (\d+) loss ([\d.]+)", result.stdout, re.MULTILINE)
    assert [int(step) for _, step, _ in steps] == list(range(1, FIXTURES[name].steps + 1)), result.stdout
    assert {rank for rank, _, _ in steps} == {"0"}
    assert "horovod" in (REPOS / name / "README.md").read_text().lower()


def _holds(launched, name: str, side: str) -> str:
    code, printed = check(launched, name, side)
    assert code == Exit.OK, printed
    verdict = re.search(r"^parity holds: .*?max relative difference ([^\s)]+)\)", printed, re.MULTILINE)
    assert verdict, printed
    # the same data, order and weights: only the order of summation differs between the two
    assert float(verdict.group(1)) <= (0 if fixture_of(name).digit_for_digit else 1e-5), printed
    assert f"steps 1-{fixture_of(name).steps} ({fixture_of(name).steps} common" in printed, printed
    return printed


def _fails(launched, name: str, side: str) -> None:
    code, printed = check(launched, name, side)
    assert code == Exit.PARITY_FAILS, printed
    assert re.search("^" + fixture_of(name).fails, printed, re.MULTILINE), printed


@pytest.mark.slow
@pytest.mark.parametrize("name", LAUNCHED)
def test_the_migrated_repository_trains_the_same(launched, name):
    _holds(launched, name, "migrated")


@pytest.mark.slow
@pytest.mark.parametrize("name", LAUNCHED)
def test_a_bug_planted_in_the_migration_fails_parity(launched, name):
    _fails(launched, name, "migrated bug")


@pytest.mark.slow
def test_verify_entry_runs_each_tree_as_the_repository_expects(tmp_path, horovod_built):
    """`compare migrate DIR -o OUT --verify --entry train.py -- ... --horovod`, as a user types it: the original's
    entry under horovodrun, the migration's under torchrun, each started as the README starts it (nothing on
    PYTHONPATH); the README's --horovod now takes the repository's own DDP path, so both sides get the same
    arguments, and alone (`python train.py --horovod`) the migration trains one process, as Horovod's did."""
    result = subprocess.run(
        [sys.executable, "-m", "compare", "migrate", str(REPOS / "horovod_switch"), "-o", str(tmp_path / "out"),
         "--verify", "--entry", "train.py", "--verify-out", str(tmp_path / "verify"), "--timeout", "240",
         "--", "--epochs", "1", "--horovod"],
        cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode == Exit.OK, result.stdout + result.stderr
    assert re.search(r"^parity holds: .*max relative difference 0\b", result.stdout, re.MULTILINE), result.stdout
    assert "started as its users start it (README.md line 9): python train.py, nothing on PYTHONPATH" in \
        result.stdout, result.stdout
    env = launch_env()
    env.pop("PYTHONPATH", None)
    alone = subprocess.run([sys.executable, "train.py", "--horovod", "--epochs", "1"], cwd=tmp_path / "out",
                           env=env, capture_output=True, text=True, timeout=120, check=False)
    assert alone.returncode == 0 and "step 16 loss " in alone.stdout, alone.stderr


@pytest.fixture(scope="module")
def verified(tmp_path_factory, horovod_built):
    """contrastive_switch through `compare migrate DIR -o OUT --verify --entry train.py -- --epochs 1`, as a user
    types it (the original under horovodrun, the migration under torchrun, each started as the README starts
    it), and beside it the migration with the wrong route planted, under torchrun: three launches."""
    out = tmp_path_factory.mktemp("verified")
    wrong = planted_in_migration("contrastive_switch", out)
    command = [sys.executable, "-m", "compare", "migrate", str(REPOS / "contrastive_switch"), "-o", str(out / "out"),
               "--verify", "--entry", "train.py", "--verify-out", str(out / "verify"), "--timeout", "240", "--",
               "--epochs", "1"]
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        verify = pool.submit(subprocess.run, command, cwd=ROOT, capture_output=True, text=True, timeout=600,
                             check=False)
        wrong_route = pool.submit(_launch_to_last_step, wrong, 16)
        return out, verify.result(), wrong_route.result()


def _launch_to_last_step(tree: Path, last_step: int) -> subprocess.CompletedProcess:
    """The tree under torchrun (as `launch`), its whole process group stopped where it outlives its last step: the
    repository's own torch path (torch.distributed.nn.all_gather under DDP, on Gloo) hangs now and then as its
    objects are torn down after the last step (1 run in 5 here: the main thread past main(), no Python frame
    left), which is no part of what is compared."""
    env = launch_env()
    env.pop("PYTHONPATH", None)
    command = [tool("torchrun"), "--standalone", "--nproc-per-node", "2", "train.py", "--epochs", "1"]
    with subprocess.Popen(command, cwd=tree, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          start_new_session=True) as process:
        try:
            stdout, stderr = process.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            # torchrun's workers sit in sessions of their own: the launcher's process group alone would leave a
            # worker holding the output pipes open, and the read below would wait for it for ever
            kill_tree(process)
            stdout, stderr = process.communicate(timeout=60)
            if f"step {last_step} loss " in stdout:
                return subprocess.CompletedProcess(command, 0, stdout, stderr)
        return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)


@pytest.mark.slow
def test_a_horovod_default_beside_an_own_path_that_differs_runs_the_migrated_horovod_branch(verified):
    """The default, horovod, still starts the Horovod job under torchrun, as the README starts it: the repository's
    own torch path gathers with a summing backward and saves `module.` keys, so the Horovod branch is migrated in
    place (its gather averaging the gradient, as hvd.allgather's did), not routed there; parity holds."""
    out, verify, _ = verified
    assert verify.returncode == Exit.OK, verify.stdout + verify.stderr
    assert re.search(r"^parity holds: .*max relative difference 0\b", verify.stdout, re.MULTILINE), verify.stdout
    assert "started as its users start it (README.md line 11): python train.py, nothing on PYTHONPATH" in \
        verify.stdout, verify.stdout
    comm, train = ((out / "out" / name).read_text() for name in ("comm.py", "train.py"))
    assert "return all_gather_cat(features)" in comm  # the Horovod branch, migrated
    assert "return torch.cat(torch.distributed.nn.all_gather(features))" in comm  # the own path, as it was
    assert 'args.distributed = "torch"' not in train and "model = DDP(model)" in train
    report = (out / "out" / "MIGRATION.md").read_text()
    assert report.count("Kept as it was, and not the route of the Horovod option") == 2, report  # gather, save
    assert "0 place(s) need a person" in report


@pytest.mark.slow
def test_the_wrong_route_to_the_summing_gather_fails_parity(verified):
    """The route the tool once took, planted: the Horovod value sent to the own torch path right after the parse.
    Its gather's backward sums where Horovod's averaged: the gradient differs from step 2 on."""
    out, _, wrong_route = verified
    result = finished_launch(wrong_route, last_line="step 16 loss ")
    log = out / "wrong_route.log"
    log.write_text(result.stdout)
    code, printed = quiet(["import", "text", str(log), "--out", str(out / "wrong_route"), "--framework", "ddp",
                           "--world-size", "2"])  # seed 0, as --verify records its sides
    assert code == Exit.OK, printed
    code, printed = quiet(["check", str(out / "verify" / "horovod"), str(out / "wrong_route")])
    assert code == Exit.PARITY_FAILS, printed
    assert re.search(r"^parity fails: diverges at step 2 \(seed 0\)", printed, re.MULTILINE), printed


@pytest.mark.slow
def test_the_migrated_package_installed_starts_with_its_console_command(launched, tmp_path):
    """package_entry's pyproject.toml names a console command, `tinynet-train = "tinynet.train:cli"`, and its
    README installs the package (`pip install .`) and launches that command. The migration, installed the same way
    into a throwaway environment, runs under torchrun from another directory with nothing on PYTHONPATH and trains
    as the original did under horovodrun. A regular install, not an editable one: it copies the package alone
    (`packages.find`), so helpers written at the tree's root would be missing (an editable install of this flat
    layout may put the root on the import path and hide that); it costs the same."""
    tree = migrated("package_entry", launched[0])
    environment = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(environment)], check=True, timeout=60)
    site_packages = subprocess.run([environment / "bin" / "python", "-c", "import sysconfig; print(sysconfig."
                                    "get_paths()['purelib'])"], capture_output=True, text=True, check=True).stdout
    # torch, Horovod and pip from the project's environment, read through a .pth: nothing is installed there
    project_sites = subprocess.run([sys.executable, "-c", "import site; print(*site.getsitepackages(), sep='\\n')"],
                                   capture_output=True, text=True, check=True).stdout
    (Path(site_packages.strip()) / "project_environment.pth").write_text(project_sites)
    env = launch_env(PATH=f"{environment / 'bin'}:{launch_env()['PATH']}")
    env.pop("PYTHONPATH", None)
    installed = subprocess.run([environment / "bin" / "python", "-m", "pip", "install", "--no-deps", "--no-index",
                                "--no-build-isolation", "--quiet", str(tree)], env=env, capture_output=True,
                               text=True, timeout=180, check=False)
    assert installed.returncode == 0, installed.stderr
    assert (environment / "bin" / "tinynet-train").exists()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    started = subprocess.run([tool("torchrun"), "--standalone", "--nproc-per-node", "2", "--no-python",
                              "tinynet-train", "--epochs", "1"], cwd=elsewhere, env=env, capture_output=True,
                             text=True, timeout=240, start_new_session=True)
    result = finished_launch(started, last_line=f"step {fixture_of('package_entry').steps} loss ")
    log = tmp_path / "console.log"
    log.write_text(result.stdout)
    code, printed = quiet(["import", "text", str(log), "--out", str(tmp_path / "console"), "--framework", "ddp",
                           "--world-size", "2", "--seed", SEED])
    assert code == Exit.OK, printed
    code, printed = quiet(["check", str(record(launched, "package_entry", "horovod")), str(tmp_path / "console")])
    assert code == Exit.OK and re.search(r"^parity holds: ", printed, re.MULTILINE), printed


# The one-process command each README gives (examples/repos/NAME/README.md), for the fixtures whose README gives
# one: run from the root of the original and of its migration, no launcher, nothing on PYTHONPATH.
ALONE = {
    "script_paths": ("scripts/train.py", "--epochs", "1"),
    "plugin_backend": ("train.py", "--backend", "local", "--epochs", "1"),
    "contrastive_switch": ("train.py", "--epochs", "1", "--distributed", "none"),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(ALONE))
def test_the_migrated_tree_starts_alone_as_the_original_did(tmp_path, name):
    """Each migrated tree started as its README starts one process, with no launcher and nothing on PYTHONPATH,
    trains the same losses as the original started so (script_paths: the probe answers "no torch.distributed
    job"; once the helpers at the tree's root, the unguarded second init or the unconditional probe each stopped
    it; plugin_backend: the local backend beside the migrated one; contrastive_switch: the `none` value beside the
    migrated Horovod branch)."""
    tree = migrated(name, tmp_path)
    env = launch_env()
    env.pop("PYTHONPATH", None)
    runs = [subprocess.run([sys.executable, *ALONE[name]], cwd=where, env=env,
                           capture_output=True, text=True, timeout=120, check=False)
            for where in (REPOS / name, tree)]
    for run in runs:
        assert run.returncode == 0, run.stderr
    losses = [[line for line in run.stdout.splitlines() if line.startswith("step ")] for run in runs]
    assert losses[0] and losses[0] == losses[1]


@pytest.mark.slow
def test_a_checkpoint_the_horovod_original_wrote_resumes_in_the_migration(tmp_path, horovod_built):
    """trainer_checkpoint: the original under horovodrun writes a checkpoint (the model's own keys, the optimizer,
    the EMA); then `compare migrate --verify --entry train.py`, as a user types it, resumes from it on both sides:
    the migrated code loads it strictly and trains on as the original does. (A migration that rebinds the model
    to its DDP wrapper saves and expects `module.` keys, and its EMA, matched by key, raises KeyError.)"""
    import torch

    checkpoint = tmp_path / "first.pt"
    ok(launch("horovodrun", REPOS / "trainer_checkpoint", ("train.py",), ("--save", str(checkpoint))))
    keys = list(torch.load(checkpoint, map_location="cpu", weights_only=True)["model"])
    assert keys and not any(key.startswith("module.") for key in keys), keys
    result = subprocess.run(
        [sys.executable, "-m", "compare", "migrate", str(REPOS / "trainer_checkpoint"), "-o", str(tmp_path / "out"),
         "--verify", "--entry", "train.py", "--verify-out", str(tmp_path / "verify"), "--timeout", "240", "--",
         "--epochs", "1", "--resume", str(checkpoint)],
        cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode == Exit.OK, result.stdout + result.stderr
    assert re.search(r"^parity holds: ", result.stdout, re.MULTILINE), result.stdout
    migrated = "".join(p.read_text() for p in (tmp_path / "out").rglob("*.py"))
    assert "self.model_ddp = DDP(self.model.model)" in migrated
    assert "self.model.module" not in migrated and "model_ddp.module" not in migrated  # (ema.module is the EMA's)


def test_the_module_handed_to_code_outside_the_repository_is_flagged_not_called_done(tmp_path, capsys):
    """package_entry's accessor, with its module handed to a library (which expects Horovod's API) and to a
    function that receives it under another name: both stay, flagged with their lines (exit 6), and the handing
    on inside the repository (`main(hvd, ...)` to `def main(hvd, ...)`) is migrated."""
    repo = tmp_path / "repo"
    shutil.copytree(REPOS / "package_entry", repo, ignore=shutil.ignore_patterns("__pycache__"))
    train = repo / "tinynet" / "train.py"
    code = train.read_text()
    assert code.count("    main(hvd, cli_args)\n") == 1
    train.write_text(code.replace("    main(hvd, cli_args)\n", "    main(hvd, cli_args)\n    report(hvd)\n"
                                  "    import monitoring\n    monitoring.attach(hvd)\n") +
                     "\n\ndef report(api) -> None:\n    print(api.size())\n")
    assert compare_main(["migrate", str(repo), "-o", str(tmp_path / "out")]) == Exit.NEEDS_A_PERSON
    err = capsys.readouterr().err
    assert "tinynet/train.py line 64 (unrecognised)" in err, err
    migrated_train = (tmp_path / "out" / "tinynet" / "train.py").read_text()
    assert "def main(dist, args: argparse.Namespace)" in migrated_train and "main(dist, cli_args)" in migrated_train
    assert "report(hvd)" in migrated_train and "monitoring.attach(hvd)" in migrated_train


@pytest.mark.campaign
@pytest.mark.parametrize("name", NAMES)
def test_hand_written_migration_trains_the_same(references, name):
    _holds(references, name, "ddp")
    _fails(references, name, "bug")


@pytest.mark.campaign
def test_switch_paths_train_the_same_job(references):
    """horovod_switch's own DDP path (--distributed, untouched by any migration) agrees with its --horovod path."""
    code, printed = check(references, "horovod_switch", "own ddp path")
    assert code == Exit.OK and "parity holds" in printed, printed


def test_each_planted_bug_edits_its_migration(tmp_path):
    """Pure: every bug's text is in its migration once, the hand-written one's and the tool's (a renamed line
    would silently plant nothing), and every fixture has an original, a migration and a README."""
    for name in NAMES:
        if name in FIXTURES:
            planted_in_migration(name, tmp_path)
        tree = planted(name, tmp_path)
        bug_file = fixture_of(name).bug_file
        assert (tree / bug_file).read_text() != (MIGRATED / name / bug_file).read_text()
        originals = {path.relative_to(REPOS / name) for path in (REPOS / name).rglob("*.py")}
        assert 3 <= len(originals) <= 10, name
        assert (REPOS / name / "README.md").exists()
        left = [path for path in (MIGRATED / name).rglob("*.py")
                if re.search(r"import horovod|horovod\.torch|\bhvd\.", path.read_text())]
        assert not left, left
    repositories = [path.name for path in REPOS.iterdir() if path.is_dir() and not path.name.startswith((".", "_"))]
    assert sorted(repositories) == sorted(NAMES)
