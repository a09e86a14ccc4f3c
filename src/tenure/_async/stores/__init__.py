"""Store modules: one small class per store implementing the Backend protocol."""
