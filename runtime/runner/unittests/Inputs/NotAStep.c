/* A shared object that is not a step library (no stamp, no description). */
int not_a_step(void) { return 0; }
