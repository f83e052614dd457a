"""`python -m autograder.classgrader ASSIGNMENT`: grade a class (grade_class.py holds the command)."""
from autograder.classgrader.grade_class import main

if __name__ == "__main__":          # not again in a worker that multiprocessing starts from this process
    main()
