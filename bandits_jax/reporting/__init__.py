"""What a run leaves and what is made of it: results folders (`results`), their figures (`plotting`),
the compact committed records (`records`), the papers' claims judged on them (`claims`), the
reproduction pages (`report`) and the generated tables of the documentation (`docs`)."""
