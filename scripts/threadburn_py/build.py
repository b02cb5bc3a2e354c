"""What a build directory was configured with (its CMakeCache.txt).

The TBB and oneDNN parts are optional (THREADBURN_WITH_TBB / _DNNL; the GPU
host build turns both off). A program of such a build refuses --loader=tbb
or --kernel=tbb/onednn, which would turn a whole sweep into failed rows, so
the sweep reads the cache first and rejects the grid before anything runs.
"""
import os

# Build feature -> (cache variable, what the message calls it).
FEATURES = {"TBB": "THREADBURN_WITH_TBB", "DNNL": "THREADBURN_WITH_DNNL"}

# CMake's false constants (if() semantics); everything else, ON/1/YES..., is true.
_FALSE = {"", "0", "OFF", "NO", "FALSE", "N", "IGNORE", "NOTFOUND"}


def cmake_bool(text):
    value = text.strip().upper()
    return not (value in _FALSE or value.endswith("-NOTFOUND"))


class BuildInfo:
    """features: {"TBB": bool, "DNNL": bool} for the variables the cache
    holds; a feature the cache does not mention (or a missing cache: no
    build to ask) counts as present, so the check never blocks on doubt."""

    def __init__(self, cache_path=None, features=None):
        self.cache_path = cache_path
        self.features = dict(features or {})

    def has(self, feature):
        return self.features.get(feature, True)

    def why_missing(self, feature):
        """'(build/CMakeCache.txt has THREADBURN_WITH_TBB=OFF)'"""
        return f"({self.cache_path} has {FEATURES[feature]}=OFF)"


def read_build(build_dir):
    """BuildInfo of <build_dir>/CMakeCache.txt; without the file, no facts."""
    if build_dir is None:
        return BuildInfo()
    path = os.path.join(build_dir, "CMakeCache.txt")
    features = {}
    try:
        with open(path, errors="replace") as f:
            for line in f:
                name, sep, value = line.rstrip("\n").partition("=")
                var = name.split(":", 1)[0]
                for feature, cache_var in FEATURES.items():
                    if sep and var == cache_var:
                        features[feature] = cmake_bool(value)
    except OSError:
        return BuildInfo()
    return BuildInfo(path, features)
