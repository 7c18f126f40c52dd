"""Helpers shared by test suites (throwaway servers and the like); no tests here."""
