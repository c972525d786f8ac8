#!/usr/bin/env python3
"""Unit tests of benchmarks/resource_usage.py that need no GPU build: kernel names, the launch
expressions, the occupancy rules (against values worked out by hand from cuda_occupancy.h), the
spill verdict, the build's ptxas reports (read per architecture; a stale one ignored) and the
README tables. Standard library only."""
import copy
import importlib.util
import json
import os
import sys
import tempfile
import unittest

# benchmarks/resource_usage.py is a script: loaded from its file.
_spec = importlib.util.spec_from_file_location("resource_usage", os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..", "benchmarks", "resource_usage.py"))
ru = sys.modules["resource_usage"] = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ru)

MMA = "_Z14fa2_mma_kernelI6__halfLi128EEvPKT_S3_S3_PS1_PfPKiS7_iiiifb"
SPARSE = ("_Z17sparse_fa2_kernelI13__nv_bfloat16Li64E16block_list_tilesEvPKT_S4_S4_PS2_PfPKiS8_"
          "iiiifbNT1_6paramsE")
FP32 = "_Z15fa2_fp32_kernelPKfS0_S0_PfS1_PKiS3_iiiiifb"
STATIC = "_ZL17mini_flash_kernelPKfS0_S0_PfS1_iiiifb"


class Names(unittest.TestCase):
    def test_describe(self):
        self.assertEqual(ru.describe(MMA), ("fa2_mma_kernel", "f16", 128, ""))
        self.assertEqual(ru.describe(SPARSE),
                         ("sparse_fa2_kernel", "bf16", 64, "block_list_tiles"))
        self.assertEqual(ru.describe(FP32), ("fa2_fp32_kernel", "f32", None, ""))
        self.assertEqual(ru.describe(STATIC), ("mini_flash_kernel", "f32", None, ""))


class TabledArchitectures(unittest.TestCase):
    """A tabled binary compiled for sm_90 alone (scripts/test.sh's build where no GPU answers,
    had attn_tabled_architectures not been called) is refused with what is missing."""

    def usage_of(self, usage_archs, ptx_archs):
        saved = ru.resource_usage, ru.spill_info
        ru.resource_usage = lambda cuobjdump, binary: {a: {} for a in usage_archs}
        ru.spill_info = lambda cuobjdump, ptxas, binary: {a: {} for a in ptx_archs}
        try:
            return ru.tabled_usage("cuobjdump", "ptxas", "lib.a")
        finally:
            ru.resource_usage, ru.spill_info = saved

    def test_both_architectures_pass(self):
        usage, spills = self.usage_of(["sm_80", "sm_90"], ["sm_80", "sm_90"])
        self.assertEqual(sorted(usage), ["sm_80", "sm_90"])

    def test_sm90_alone_is_refused(self):
        with self.assertRaises(SystemExit):
            self.usage_of(["sm_90"], ["sm_90"])

    def test_sass_without_ptx_is_refused(self):  # 90-real: SASS, no PTX to compile again
        with self.assertRaises(SystemExit):
            self.usage_of(["sm_80", "sm_90"], ["sm_80"])


class CompileReports(unittest.TestCase):
    """The reports cmake/ptxas_log.sh keeps beside each object (nvcc -Xptxas=-v)."""
    REPORT = """ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function '_Z1kPf' for 'sm_80'
ptxas info    : Function properties for _Z1kPf
    8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads
ptxas info    : Used 255 registers, used 1 barriers, 1024 bytes smem, 360 bytes cmem[0]
ptxas info    : Compiling entry function '_Z1kPf' for 'sm_90'
ptxas info    : Function properties for _Z1kPf
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 96 registers, 360 bytes cmem[0]
"""

    def build(self, tmp, report_age):
        """A library's build folder: libk_gpu.a, its object, and the report report_age s older."""
        obj_dir = os.path.join(tmp, "CMakeFiles", "k_gpu.dir")
        os.makedirs(obj_dir)
        obj = os.path.join(obj_dir, "k.cu.o")
        with open(obj, "w") as f:
            f.write("")
        with open(obj + ".ptxas", "w") as f:
            f.write(self.REPORT)
        t = os.path.getmtime(obj)
        os.utime(obj + ".ptxas", (t - report_age, t - report_age))
        return os.path.join(tmp, "libk_gpu.a")

    def test_per_architecture(self):
        with tempfile.TemporaryDirectory() as tmp:
            got = ru.compile_reports(self.build(tmp, 0))
        self.assertEqual(got["sm_80"]["_Z1kPf"],
                         {"stack_bytes": 8, "spill_store_bytes": 4, "spill_load_bytes": 4,
                          "registers": 255, "barriers": 1, "static_shared_bytes": 1024})
        self.assertEqual(got["sm_90"]["_Z1kPf"],
                         {"stack_bytes": 0, "spill_store_bytes": 0, "spill_load_bytes": 0,
                          "registers": 96, "barriers": 0, "static_shared_bytes": 0})

    def test_stale_report_is_not_read(self):  # the object compiled again without a report
        with tempfile.TemporaryDirectory() as tmp:
            self.assertIsNone(ru.compile_reports(self.build(tmp, 60)))

    def test_no_report(self):
        with tempfile.TemporaryDirectory() as tmp:
            binary = self.build(tmp, 0)
            os.remove(os.path.join(tmp, "CMakeFiles", "k_gpu.dir", "k.cu.o.ptxas"))
            self.assertIsNone(ru.compile_reports(binary))


class Launch(unittest.TestCase):
    def test_evaluate(self):
        defs = {"BR": "64", "MMA_BC": "ATTN_FA2_BC", "ATTN_FA2_BC": "64", "ATTN_SMEM_PAD": "8"}
        expr = "(BR + 2 * MMA_BC) * attn_padded_layout<D>::LD * sizeof(T)"
        self.assertEqual(ru.evaluate(expr, defs, 128, 2), (64 + 2 * 64) * (128 + 8) * 2)
        defs = {"BR": "32", "BC": "32"}
        expr = ru.LAUNCH["sparse_mask_kernel"][1]
        self.assertEqual(ru.evaluate(expr, defs, 64, 4), (2 * 32 + 2 * 32) * 65 * 4)
        self.assertEqual(ru.evaluate("WARPS * 32", {"WARPS": "4"}, 64, 2), 128)

    def test_unknown_name_is_refused(self):
        with self.assertRaises(SystemExit):
            ru.evaluate("(BR + UNDEFINED) * D", {"BR": "64"}, 64, 2)

    def test_changed_launcher_is_refused(self):
        with tempfile.TemporaryDirectory() as tmp:
            src = os.path.join(tmp, "k.cu")
            with open(src, "w") as f:
                f.write("#define BR 32\n#define BC 32\n"
                        "size_t smem = (size_t)(3 * BR + 2 * BC) * (p->D + 1) * sizeof(float);\n"
                        "kernel<<<grid, BR, smem, stream>>>(q);\n")
            root, ru.ROOT = ru.ROOT, tmp
            try:
                with self.assertRaises(SystemExit):
                    ru.launch_config("sparse_mask_kernel", "k.cu", 64, "f32")
            finally:
                ru.ROOT = root


class Shapes(unittest.TestCase):
    LINES = ('{"impl":"03/fa2_mma","kernel":"fa2_mma","global":"fa2_mma_kernel","dtype":"f16",'
             '"D":64,"threads":128,"dynamic_shared_bytes":27648}\n'
             '{"impl":"04/dense_fa2","kernel":"dense_fa2","global":"fa2_mma_kernel",'
             '"dtype":"f16","D":64,"threads":128,"dynamic_shared_bytes":27648}\n')

    def test_registry_shapes_win(self):
        shapes = ru.parse_launch_shapes(self.LINES)
        self.assertEqual(shapes, {("fa2_mma_kernel", "f16", 64): (128, 27648)})
        self.assertEqual(ru.launch_config("fa2_mma_kernel", "x.cu", 64, "f16", shapes),
                         (128, 27648))

    def test_disagreeing_entries_are_refused(self):
        with self.assertRaises(SystemExit):
            ru.parse_launch_shapes(self.LINES.replace("27648}\n{", "27648}\n{", 1)
                                   .rsplit("27648", 1)[0] + "27650}\n")

    def test_kernel_without_shape_is_refused(self):
        with self.assertRaises(SystemExit):
            ru.launch_config("fa2_mma_kernel", "x.cu", 128, "f16", {})


class Occupancy(unittest.TestCase):
    # 128 threads = 4 warps, one per sub-partition; a sub-partition has 65536 / 4 = 16384
    # registers, a warp takes regs * 32 rounded up to 256.
    def blocks(self, arch, regs, static=0, dyn=0, threads=128, barriers=1):
        return ru.occupancy(arch, regs, static, dyn, threads, barriers)["blocks_per_sm"]

    def test_registers(self):
        self.assertEqual(self.blocks("sm_90", 173), 2)  # 5632 per warp: 16384 // 5632 = 2
        self.assertEqual(self.blocks("sm_90", 168), 3)  # 5376 per warp: 3
        self.assertEqual(self.blocks("sm_90", 128), 4)  # 4096 per warp: 4
        self.assertEqual(self.blocks("sm_90", 37, threads=256), 6)  # 1280: 12 warps per sub
        self.assertEqual(self.blocks("sm_90", 32, threads=256), 8)  # 64 warps: all of them

    def test_shared_memory(self):
        # 81920 + 1024 reserved = 82944: 233472 // 82944 = 2 (H100), 167936 // 82944 = 2 (A100)
        self.assertEqual(self.blocks("sm_90", 64, dyn=81920), 2)
        self.assertEqual(self.blocks("sm_80", 64, dyn=81920), 2)
        # 40960 + 1024: 5 on H100, 4 on A100
        self.assertEqual(self.blocks("sm_90", 64, dyn=40960), 5)
        self.assertEqual(self.blocks("sm_80", 64, dyn=40960), 4)
        # more than a block may opt in to: none
        self.assertEqual(self.blocks("sm_80", 64, dyn=170000), 0)

    def test_limiter_and_fraction(self):
        o = ru.occupancy("sm_90", 243, 0, 81920, 128, 1)
        self.assertEqual(o["limited_by"], ["registers", "shared memory"])
        self.assertAlmostEqual(o["occupancy"], 8 / 64)


def kernel(label="03", spill=0, regs=173, arch_spill="sm_90"):
    res = {"registers": regs, "stack_bytes": 0, "static_shared_bytes": 0, "local_bytes": 0,
           "cuobjdump_shared_bytes": 0, "spill_store_bytes": 0, "spill_load_bytes": 0,
           "barriers": 1}
    resources = {a: dict(res) for a in ("sm_80", "sm_86", "sm_89", "sm_90")}
    resources[arch_spill]["spill_store_bytes"] = spill
    occ = {a: ru.occupancy(a, regs, 0, 52224, 128, 1) for a in ru.DEVICES}
    return {"example": label, "kernel": "fa2_mma", "variant": "", "dtype": "f16", "D": 128,
            "D_is_template": True, "mangled": MMA, "binary": "x.a",
            "source": "examples/03_flash_attention_v2/flash2_fwd.cu", "threads": 128,
            "dynamic_shared_bytes": 52224, "resources": resources, "occupancy": occ}


class Verdicts(unittest.TestCase):
    def test_spills_on_checked_archs_only(self):
        self.assertEqual(ru.spilling([kernel()]), [])
        self.assertEqual(len(ru.spilling([kernel(spill=8)])), 1)
        self.assertEqual(len(ru.spilling([kernel(spill=8, arch_spill="sm_80")])), 1)
        self.assertEqual(ru.spilling([kernel(spill=8, arch_spill="sm_86")]), [])

    def test_readme_tables(self):
        data = {"nvcc": "13.0", "commit": "abc", "date": "2026-01-01", "kernels": [kernel()]}
        with tempfile.TemporaryDirectory() as tmp:
            readme = os.path.join(tmp, "README.md")
            with open(readme, "w") as f:
                f.write("# x\n<!-- resources:03 -->\nold\n<!-- /resources:03 -->\nend\n")
            root, binaries = ru.ROOT, ru.BINARIES
            os.symlink(os.path.join(root, data["kernels"][0]["source"]), os.path.join(tmp, "k.cu"))
            ru.ROOT, ru.BINARIES = tmp, [("03", "x.a", "k.cu", "README.md")]
            try:
                data["kernels"][0]["source"] = "k.cu"
                self.assertEqual(ru.readme_tables(data, update=False), ["README.md"])
                self.assertEqual(ru.readme_tables(data, update=True), ["README.md"])
                self.assertEqual(ru.readme_tables(data, update=False), [])
                text = ru.read(readme)
                self.assertIn("| `fa2_mma` | f16 | 128 | 128 | 173 | 0 / 0 |", text)
                self.assertTrue(text.endswith("<!-- /resources:03 -->\nend\n"))
                # a new register count: the table is stale, also when comparing rows only
                fresh = copy.deepcopy(data)
                fresh["kernels"][0]["resources"]["sm_90"]["registers"] = 170
                fresh["commit"] = "def"
                self.assertEqual(ru.readme_tables(fresh, False, compare_rows_only=True),
                                 ["README.md"])
                # another commit or date alone is not staleness of the figures
                same = copy.deepcopy(data)
                same["commit"] = "def"
                self.assertEqual(ru.readme_tables(same, False, compare_rows_only=True), [])
            finally:
                ru.ROOT, ru.BINARIES = root, binaries


class Committed(unittest.TestCase):
    def test_committed_json_is_well_formed(self):
        path = os.path.join(ru.ROOT, ru.RESULTS, ru.JSON_NAME)
        data = json.loads(ru.read(path))
        for key in ("nvcc", "commit", "date", "kernels", "device_limits"):
            self.assertIn(key, data)
        self.assertTrue(data["kernels"])
        for k in data["kernels"]:
            self.assertIn("sm_90", k["resources"])
            self.assertIn("sm_80", k["occupancy"])


if __name__ == "__main__":
    unittest.main()
