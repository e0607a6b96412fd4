"""Helpers with no lowwater dependency (standard library only), below every other layer."""
