# Copyright 2026 The arctic-verl Authors
# SPDX-License-Identifier: Apache-2.0
"""The shipped launchers: the H200 GSM8K launcher's --dry-run composes a valid config, prepare-gsm8k writes rows
verl's own dataset class loads, and the smoke task's reward gives partial credit."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

BIN = os.path.dirname(sys.executable)
CLI = os.path.join(BIN, "arctic-verl")
GSM8K = [
    {"question": "Tom has 3 apples and buys 4 more. How many apples does he have?", "answer": "3+4=7\n#### 7"},
    {"question": "What is 10 times 120?", "answer": "10*120=1200\n#### 1,200"},
    {"question": "Half of 9?", "answer": "9/2=4.5\n#### 4.5"},
]


@pytest.fixture(scope="module")
def gsm8k_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("gsm8k")
    for split in ("train", "test"):
        (root / f"gsm8k_{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in GSM8K))
    out = root / "prepared"
    r = subprocess.run(
        [CLI, "prepare-gsm8k", "--input", str(root / "gsm8k_train.jsonl"), "--input", str(root / "gsm8k_test.jsonl"),
         "--out", str(out)], capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    return out


def test_prepare_gsm8k_rows_load_in_verls_dataset(gsm8k_dir, tiny_model):
    import pandas as pd
    from omegaconf import OmegaConf
    from transformers import AutoTokenizer

    from verl.utils.dataset.rl_dataset import RLHFDataset

    frame = pd.read_parquet(gsm8k_dir / "train.parquet")
    assert list(frame["reward_model"].map(lambda r: r["ground_truth"])) == ["7", "1200", "4.5"]
    assert set(frame["data_source"]) == {"openai/gsm8k"}
    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    config = OmegaConf.create({"max_prompt_length": 512, "prompt_key": "prompt", "filter_overlong_prompts": False})
    dataset = RLHFDataset(data_files=[str(gsm8k_dir / "train.parquet")], tokenizer=tokenizer, config=config)
    assert len(dataset) == 3
    item = dataset[0]
    assert item["data_source"] == "openai/gsm8k" and item["reward_model"]["ground_truth"] == "7"


def test_prepare_gsm8k_refuses_rows_without_a_final_answer(tmp_path):
    bad = tmp_path / "train.jsonl"
    bad.write_text(json.dumps({"question": "q", "answer": "no final answer"}) + "\n")
    r = subprocess.run([CLI, "prepare-gsm8k", "--input", str(bad), "--out", str(tmp_path / "o")],
                       capture_output=True, text=True, timeout=300)  # fmt: skip
    assert r.returncode != 0 and "no '#### <number>' final answer" in r.stderr


def _launcher(env, *args):
    path = subprocess.run([CLI, "launcher", "gsm8k-h200"], capture_output=True, text=True, check=True).stdout.strip()
    assert Path(path).is_file() and path.endswith("gsm8k_h200.sh")
    full_env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "EXTRA_ENV_CHECK": "0", **env}
    return subprocess.run(["bash", path, *args], capture_output=True, text=True, timeout=300, env=full_env)


def test_h200_launcher_dry_run_uses_the_whole_node(gsm8k_dir, tiny_model):
    """ARCTIC_BACKEND=local (the default): the printed plan splits 8 GPUs (4 training, 4 sampling replicas of TP 1,
    the reference sharded on the 4 training GPUs), the composed config carries that split and an attention the
    embedded server loads here, and every start-up check passes."""
    r = _launcher({"MODEL_PATH": str(tiny_model), "DATA_DIR": str(gsm8k_dir)}, "--dry-run")
    assert r.returncode == 0, r.stderr[-3000:]
    assert "compose_check: OK" in r.stdout
    assert "trainer_mode: remote_backend" in r.stdout and "remote_backend: arctic" in r.stdout
    assert f"train_files: {gsm8k_dir}/train.parquet" in r.stdout
    assert "node plan: 8 x H200 (assumed: no GPU visible)" in r.stderr, r.stderr[-3000:]
    assert "  training  4 GPU(s) cuda:0-3: FSDP2 over 4 rank(s); 16 B/param sharded = " in r.stderr
    assert "  sampling  4 GPU(s) cuda:4-7: 4 vLLM replica(s) x TP 1; bf16 weights " in r.stderr
    assert "  log_prob  4 GPU(s) cuda:0-3 (the training GPUs: FSDP2 forward-only, sharded): reference" in r.stderr
    for line in ("training_gpus: 4", "sampling_gpus: 4", "log_prob_gpus: 4", "log_prob_devices: training",
                 "tensor_model_parallel_size: 1", "attn_implementation: sdpa", "sampling_engine: vllm"):  # fmt: skip
        assert line in r.stdout, line


def test_h200_launcher_refuses_zorro_on_the_embedded_server(tmp_path):
    r = _launcher({"MODEL_PATH": str(tmp_path), "DATA_DIR": str(tmp_path), "ZORRO": "1"}, "--dry-run")
    assert r.returncode == 2 and "ZORRO=1 with ARCTIC_BACKEND=local: forest cascade attention needs" in r.stderr
    assert "ARCTIC_BACKEND=onprem" in r.stderr


def test_h200_launcher_missing_env_is_a_clear_error(gsm8k_dir):
    r = _launcher({"DATA_DIR": str(gsm8k_dir), "MODEL_PATH": ""}, "--dry-run")
    assert r.returncode == 2 and "MODEL_PATH is not set" in r.stderr


def test_h200_launcher_dry_run_reports_an_invalid_config(gsm8k_dir, tiny_model):
    env = {"MODEL_PATH": str(tiny_model), "DATA_DIR": str(gsm8k_dir)}
    r = _launcher(env, "--dry-run", "actor_rollout_ref.rollout.tensor_model_parallel_size=3")
    assert r.returncode == 1, r.stderr[-3000:]
    assert "actor_rollout_ref.rollout.tensor_model_parallel_size=3 with remote_backend.arctic.sampling_gpus=4" in (
        r.stderr
    )


def test_digit_task_reward_gives_partial_credit():
    from arctic_platform.integrations.verl.tasks.repeat_digit import compute_score, make_rows

    assert compute_score("s", "7777", "7") == 1.0
    assert compute_score("s", "1234", "7") == 0.5
    assert compute_score("s", "abcd", "7") == 0.0
    assert compute_score("s", "7 a", "7") == pytest.approx(0.5)
    assert compute_score("s", "", "7") == 0.0
    rows = make_rows(4, "train", seed=0)
    assert rows[0]["prompt"][0]["content"].startswith("Repeat the digit: ")


def test_the_smoke_launcher_writes_its_data_set_without_importing_verl(tmp_path):
    # the launcher only writes files and waits for main_ppo; importing verl there cost ~11 s of the smoke's wall time
    code = (
        "import sys, json\n"
        "from pathlib import Path\n"
        "from arctic_platform import smoke\n"
        "train, val = smoke.task_module().write_dataset(Path(sys.argv[1]), seed=0)\n"
        "print(json.dumps([str(train), str(val), str(smoke.TASK_FILE), 'verl' in sys.modules]))\n"
    )
    r = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    train, val, task_file, verl_imported = json.loads(r.stdout.strip().splitlines()[-1])
    assert not verl_imported
    assert Path(train).stat().st_size > 0 and Path(val).stat().st_size > 0
    # the reward verl loads by path is the wheel's task module, the same file as the package's
    from arctic_platform.integrations.verl.tasks import repeat_digit

    assert Path(task_file) == Path(repeat_digit.__file__).resolve()
