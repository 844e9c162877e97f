"""The seeded wrong answers: exNN.py holds exercise NN's, each a function whose docstring names the mistake."""
