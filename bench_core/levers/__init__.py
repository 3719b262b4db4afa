"""The lever registry: every lever's spec, the Stage built from levers, and the presets."""
