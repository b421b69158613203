"""`tuner bench`'s sections: the engine measured against the limits of the machine it runs
on, one module a section, declared in sections.py."""
