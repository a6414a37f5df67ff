"""verification: the tracker flag changes the module hash (always rebuilt) and is ignored by loaded modules.

Run as `python ver_tracker_build.py on` or `... off` (the flag value while the module is first built).
"""

import json
import sys

import warp as wp

flag_at_build = sys.argv[1] == "on"
wp.config.verify_autograd_array_access = flag_at_build


class Collect:
    def __init__(self):
        self.infos, self.warnings = [], []

    def debug(self, msg):
        pass

    def info(self, msg):
        self.infos.append(str(msg))

    def warning(self, msg, category=None, stacklevel=1):
        self.warnings.append(str(msg))

    def error(self, msg):
        pass


@wp.kernel
def double(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = 2.0 * x[i]


@wp.kernel
def fill(x: wp.array(dtype=float)):
    x[wp.tid()] = 0.0


log = Collect()
with wp.ScopedLogger(log):
    wp.load_module(device="cpu")
    wp.config.verify_autograd_array_access = True  # too late for a module that is already loaded
    x = wp.ones(2, dtype=float, requires_grad=True)
    y = wp.zeros(2, dtype=float, requires_grad=True)
    with wp.Tape():
        wp.launch(double, dim=2, inputs=[x], outputs=[y])
        wp.launch(fill, dim=2, inputs=[x])
loads = [m for m in log.infos if m.startswith("Module ") and " load on device " in m]
print(json.dumps({"module_loads": loads, "overwrite_warnings": log.warnings}))
