"""Benchmark forms ("recipes"), each a package over the recipe-neutral core; they never import each other."""
