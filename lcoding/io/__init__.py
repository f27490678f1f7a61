"""Files: the LIBSVM reader (``reader``), model files (``model_files``) and the
benchmark data sets (``datasets``)."""
