"""The tutorial engine; it imports only ``cifarlab.errors`` and ``cifarlab.i18n``."""
