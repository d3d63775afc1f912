#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""scripts/check-layers.py: the tree passes, and each kind of upward include fails it."""
import pathlib
import subprocess
import sys
import tempfile
import unittest

ROOT = pathlib.Path(__file__).resolve().parents[2]
CHECKER = ROOT / "scripts" / "check-layers.py"


def run(src):
    return subprocess.run([sys.executable, str(CHECKER), str(src)], capture_output=True, text=True)


class LayerCheckTest(unittest.TestCase):
    def tree(self, files):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        src = pathlib.Path(tmp.name) / "src"
        for name, text in files.items():
            p = src / name
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text)
        return src

    def test_the_project_tree_is_layered(self):
        r = run(ROOT / "src")
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_downward_and_same_layer_includes_pass(self):
        src = self.tree({
            "util/log.h": '#include "nccl/net.h"\n',
            "nccl/net.h": "",
            "transport/connection.h": '#include "util/log.h"\n',
            "transport/tcp/a.cc": '#include "transport/connection.h"\n#include "transport/tcp/a.h"\n',
            "transport/tcp/a.h": "#include <vector>\n",
            "abi/v11.cc": '#include "plugin/plugin.h"\n',
            "plugin/plugin.h": '#include "transport/tcp/a.h"\n',
        })
        r = run(src)
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_upward_include_fails_and_names_both_layers(self):
        src = self.tree({
            "util/log.h": '#include "plugin/plugin.h"\n',
            "plugin/plugin.h": "",
        })
        r = run(src)
        self.assertEqual(r.returncode, 1)
        self.assertIn("util/log.h:1", r.stderr)
        self.assertIn("higher layer 'plugin'", r.stderr)

    def test_gin_sits_between_plugin_and_abi(self):
        ok = self.tree({
            "gin/comm.cc": '#include "plugin/plugin.h"\n',
            "plugin/plugin.h": "",
            "abi/gin_v11.cc": '#include "gin/core.h"\n',
            "gin/core.h": "",
        })
        self.assertEqual(run(ok).returncode, 0)
        bad = self.tree({
            "plugin/plugin.cc": '#include "gin/core.h"\n',
            "gin/core.h": "",
        })
        r = run(bad)
        self.assertEqual(r.returncode, 1)
        self.assertIn("higher layer 'gin'", r.stderr)

    def test_handshake_including_transport_fails(self):
        src = self.tree({
            "handshake/service.cc": '// x\n#include "transport/tcp/tcp_connection.h"\n',
            "transport/tcp/tcp_connection.h": "",
        })
        r = run(src)
        self.assertEqual(r.returncode, 1)
        self.assertIn("service.cc:2", r.stderr)

    def test_relay_sits_between_topology_and_handshake(self):
        ok = self.tree({
            "handshake/outbound.cc": '#include "relay/request.h"\n',
            "relay/request.h": '#include "topology/interface.h"\n',
            "topology/interface.h": "",
        })
        self.assertEqual(run(ok).returncode, 0)
        bad = self.tree({
            "relay/agent.cc": '#include "handshake/hello.h"\n',
            "handshake/hello.h": "",
        })
        r = run(bad)
        self.assertEqual(r.returncode, 1)
        self.assertIn("higher layer 'handshake'", r.stderr)

    def test_sibling_transports_do_not_include_each_other(self):
        src = self.tree({
            "transport/tcp/a.cc": '#include "transport/rdma/b.h"\n',
            "transport/rdma/b.h": "",
        })
        r = run(src)
        self.assertEqual(r.returncode, 1)
        self.assertIn("sibling transport/rdma", r.stderr)

    def test_a_folder_that_is_not_a_layer_fails(self):
        src = self.tree({"core/x.h": "", "util/y.h": '#include "core/x.h"\n'})
        r = run(src)
        self.assertEqual(r.returncode, 1)
        self.assertIn("src/core/ is not a layer", r.stderr)
        self.assertIn("is not a layer", r.stderr)

    def test_stamp_written_only_when_clean(self):
        bad = self.tree({"util/a.h": '#include "abi/b.h"\n', "abi/b.h": ""})
        stamp = bad.parent / "stamp"
        subprocess.run([sys.executable, str(CHECKER), str(bad), "--stamp", str(stamp)],
                       capture_output=True)
        self.assertFalse(stamp.exists())


if __name__ == "__main__":
    unittest.main()
