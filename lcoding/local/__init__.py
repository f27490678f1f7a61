"""Shared building blocks of the locally linear methods: anchors, local codings,
the k* coding, additive kernel maps and the locally linear model."""
