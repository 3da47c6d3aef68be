"""Tests of the recipe plugin `tests/recipe_plugin` (installed: `pip install ./tests/recipe_plugin`).

The registry is loaded before the plugin's modules are imported: a plugin imported first would
be half-initialised when `mrcr_gen` loads the registry and left out of it."""

import mrcr_gen.recipes  # noqa: F401
