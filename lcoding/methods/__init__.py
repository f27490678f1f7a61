"""The training methods, one module each (``linear``, ``llsvm``, ``occ``,
``llc_jo``, ``kq``, ``invariant``); :mod:`lcoding.training` routes to them."""
