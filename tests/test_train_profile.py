"""`seedfleet bench --mode train_profile`: oneDNN's lines of a learner step, parsed and summed."""

import json

import pytest
from conftest import Proc, seedfleet

from seedfleet.bench.train_profile import parse_exec_line, profile_rows, summarize

BACKWARD_WEIGHTS = (
    "onednn_verbose,v1,primitive,exec,cpu,convolution,jit_bf16:avx512_core_bf16,backward_weights,"
    "src:bf16::blocked:acdb::f0 wei:bf16:a:blocked:ABcd16b16a::f0 bia:undef::undef::: dst:bf16::blocked:acdb::f0,,"
    "alg:convolution_direct,mb264_ic32oc64_ih20oh9kh4sh2dh0ph0_iw20ow9kw4sw2dw0pw0,10.9119"
)
FORWARD = (
    "onednn_verbose,v1,primitive,exec,cpu,convolution,brg_conv_fwd:avx512_core_bf16,forward_training,"
    "src:bf16::blocked:acdb::f0 wei:bf16:a:blocked:AcdB32a2b::f0 bia:bf16:a:blocked:a::f0 dst:bf16::blocked:acdb::f0,"
    "attr-scratchpad:user attr-post-ops:eltwise_relu,alg:convolution_direct,"
    "mb264_ic4oc32_ih84oh20kh8sh4dh0ph0_iw84ow20kw8sw4dw0pw0,4.521"
)


def test_exec_lines_are_parsed_and_other_lines_are_not():
    call = parse_exec_line(BACKWARD_WEIGHTS)
    assert (call.kind, call.propagation, call.implementation) == (
        "convolution", "backward_weights", "jit_bf16:avx512_core_bf16")
    assert call.shape == "mb264_ic32oc64_ih20oh9kh4sh2dh0ph0_iw20ow9kw4sw2dw0pw0" and call.ms == pytest.approx(10.9119)
    stamped = BACKWARD_WEIGHTS.replace("onednn_verbose,v1,", "onednn_verbose,1795667658.675,v1,")
    assert parse_exec_line(stamped) == call
    assert parse_exec_line("onednn_verbose,v1,info,cpu,runtime:threadpool,nthr:2") is None
    assert parse_exec_line(BACKWARD_WEIGHTS.replace(",exec,", ",create:cache_miss,")) is None
    assert parse_exec_line("frames 79,360  fps 2,642") is None


def test_calls_are_summed_per_learner_step_largest_first():
    calls = [parse_exec_line(line) for line in (FORWARD, BACKWARD_WEIGHTS, BACKWARD_WEIGHTS, FORWARD)]
    profile = summarize(calls, learner_steps=2, wall_s=0.05)
    first, second = profile["primitives"]
    assert first["pass"] == "backward_weights" and first["ms_per_step"] == pytest.approx(10.91, abs=0.01)
    assert first["calls_per_step"] == 1 and second["pass"] == "forward_training"
    assert profile["onednn_ms_per_step"] == pytest.approx((2 * 10.9119 + 2 * 4.521) / 2, abs=0.1)
    assert profile["wall_ms_per_step"] == 25.0
    assert "| 10.9 | 1 | convolution | backward_weights |" in "\n".join(profile_rows(profile))


def test_the_profile_of_a_minatar_learner_step_holds_its_convolution_passes(tmp_path):
    """TensorFlow runs convolutions through oneDNN by default only on CPUs with AVX-512 (and
    XLA compiles them itself): the profile is checked with both set so, on any x86 CPU."""
    out = tmp_path / "profile.json"
    bench = Proc(seedfleet("bench", "--env", "MinAtar/Breakout-v1", "--algo", "vtrace", "--batch-size", "8",
                           "--mode", "train_profile", "--no-jit-compile", "--json", str(out)),
                 env={"TF_ENABLE_ONEDNN_OPTS": "1"})
    assert bench.popen.wait(timeout=240) == 0, bench.output()[-3000:]
    profile = json.loads(out.read_text())["train_profile"]
    passes = {row["pass"] for row in profile["primitives"] if row["kind"] == "convolution"}
    assert {"forward_training", "backward_weights"} <= passes, profile["primitives"]
    assert 0 < profile["onednn_ms_per_step"] and 0 < profile["wall_ms_per_step"]
    assert "ms per learner step" in bench.output() and "onednn_verbose" not in bench.output()
