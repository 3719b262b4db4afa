"""What a stage is timed as (sweep.timing.variants): its compiled variants, and a block's GEMM shapes by family."""


from bench_core.config.bench_config import BenchConfig
from bench_core.levers.stage import Stage
from bench_core.models.families import architecture
from bench_core.sweep.timing.timings import Part
from bench_core.sweep.timing.variants import block_gemms

BF16 = Stage("adam-fused", "layernorm", "bf16")




def test_a_compiled_stage_names_the_compiled_variants_of_what_torch_compile_traces():
    from bench_core.sweep.timing.variants import breakdown_parts, stage_parts
    fp8 = BF16.replace(precision="fp8-torchao", compile="compile")
    assert dict(breakdown_parts(fp8)) == {
        Part.GEMM: "fp8+compile", Part.ATTENTION: "bf16", Part.NORM: "layernorm@bf16+compile",
        Part.ACTIVATION: "gelu@bf16+compile", Part.LOSS: "ce@bf16+compile", Part.OPTIMIZER: "adam-fused"}
    eager = dict(breakdown_parts(BF16.replace(precision="fp8-torchao")))
    assert eager[Part.GEMM] == "fp8" and eager[Part.NORM] == "layernorm@bf16"
    # a CUDA graph replays eager kernels: its parts are the eager ones
    assert dict(breakdown_parts(BF16.replace(compile="graphs"))) == dict(breakdown_parts(BF16))
    # the prediction's own parts: the whole step at one block and at two, named by the stage's key
    assert stage_parts(fp8)[:2] == [(Part.STEP_1, fp8.key), (Part.STEP_2, fp8.key)]


def test_block_gemms_follow_the_family():
    gpt = BenchConfig(family="gpt", width=768, heads=12)
    llama = BenchConfig(family="llama", width=2048, heads=32)
    assert block_gemms(architecture(gpt)) == [(768, 2304), (768, 768), (768, 3072), (3072, 768)]
    assert block_gemms(architecture(llama)) == [(2048, 6144), (2048, 2048), (2048, 5632), (2048, 5632),
                                                (5632, 2048)]
