"""The openai/mrcr recipe: 2, 4 or 8 identical asks hidden in a long chat, asked for by ordinal,
in the exact parquet schema of the `openai/mrcr` dataset. Its catalog, offline writer, assembler,
generation, row layout, checks, repair, eval reader, grader and floors live here; `RECIPE` is what
the commands dispatch through."""
